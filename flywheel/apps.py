from django.apps import AppConfig


class FlywheelConfig(AppConfig):
    name = "flywheel"
    verbose_name = "Tenants and API keys"

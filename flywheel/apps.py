from django.apps import AppConfig


class FlywheelConfig(AppConfig):
    name = "flywheel"
    verbose_name = "Tenants and API keys"

    def ready(self) -> None:
        from flywheel import openapi, signals  # noqa: F401 - receivers, schema extension

from django.apps import AppConfig


class BackendsConfig(AppConfig):
    name = "backends"
    verbose_name = "Backends"

from django.apps import AppConfig


class BackendsConfig(AppConfig):
    name = "backends"
    verbose_name = "Backends"

    def ready(self) -> None:
        from backends import signals  # noqa: F401 - connects the receivers

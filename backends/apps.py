from django.apps import AppConfig


class BackendsConfig(AppConfig):
    name = "backends"
    verbose_name = "Backends"

    def ready(self) -> None:
        from backends import signals  # noqa: F401 - connects the receivers
        from backends.collectors import backend_states
        from flywheel.metrics import register_collector

        register_collector(backend_states)

from django.apps import AppConfig


class ChatflowsConfig(AppConfig):
    name = "chatflows"
    verbose_name = "Flows"

    def ready(self) -> None:
        from chatflows import signals  # noqa: F401 - connects the receivers

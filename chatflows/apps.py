from django.apps import AppConfig


class ChatflowsConfig(AppConfig):
    name = "chatflows"
    verbose_name = "Flows"

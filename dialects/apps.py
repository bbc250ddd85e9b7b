from django.apps import AppConfig


class DialectsConfig(AppConfig):
    """Doors in other APIs' words (OpenAI-compatible under /v1). It has no models: each
    door turns its dialect into a universal query and answers through routing's service."""

    name = "dialects"
    verbose_name = "Dialects"

from django.apps import AppConfig


class RoutingConfig(AppConfig):
    name = "routing"
    verbose_name = "Routing"

    def ready(self) -> None:
        """Connect the receivers, and hand the layers below what routing owns: the
        policy's health numbers (backends/policy.py) and keyword derivation from the
        intent rules (chatflows/keywords.py)."""
        from backends.policy import use_health_policy
        from chatflows.keywords import use_keyword_deriver
        from routing import signals  # noqa: F401 - connects the receivers
        from routing.classification.rules import flow_keywords
        from routing.selection.state import routing_health_policy

        use_health_policy(routing_health_policy)
        use_keyword_deriver(flow_keywords)

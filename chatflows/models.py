"""Flows discovered on backends: what each backend can answer."""

from __future__ import annotations

from django.db import models

from backends.adapters.records import ID_CHARS, NAME_CHARS, TYPE_CHARS
from backends.models import Backend


class FlowScope(models.TextChoices):
    """Which query type (seed 004) a flow is best at."""

    GLOBAL = "global", "Global (themes, overviews)"
    LOCAL = "local", "Local (specific facts)"
    ANY = "any", "Any"


class FlowQuerySet(models.QuerySet["Flow"]):
    def active(self) -> FlowQuerySet:
        """Flows still present on their backend the last time it was discovered."""
        return self.filter(removed_at__isnull=True)

    def routable(self) -> FlowQuerySet:
        """Active, deployed flows on enabled backends."""
        return self.active().filter(deployed=True, backend__enabled=True)


class Flow(models.Model):
    """A flow (Flowise chatflow/agentflow, Langflow flow) as last discovered.

    Vanished flows are marked removed, never deleted: routing decisions and
    performance records keep pointing at them.
    """

    backend = models.ForeignKey(Backend, on_delete=models.CASCADE, related_name="flows")
    # Widths the adapters hold every record to (backends/adapters/records.py), so a
    # backend's record that does not fit is refused there, by name, not here.
    external_id = models.CharField(
        max_length=ID_CHARS, help_text="The backend's own id for the flow."
    )
    name = models.CharField(max_length=NAME_CHARS)
    flow_type = models.CharField(
        max_length=TYPE_CHARS,
        blank=True,
        help_text="CHATFLOW, AGENTFLOW, MULTIAGENT, ASSISTANT, FLOW…",
    )
    deployed = models.BooleanField(default=False)
    description = models.TextField(blank=True)  # FLYWHEEL_RECORD_FIELD_MAX_BYTES at most
    endpoint_name = models.CharField(max_length=NAME_CHARS, blank=True)
    # When the backend says it created the flow, as it wrote it (seed 003's createdDate).
    backend_created = models.CharField(max_length=64, blank=True, default="")
    intent_keywords = models.JSONField(
        default=list, blank=True, help_text="Intent slugs and keywords this flow serves."
    )
    scope = models.CharField(max_length=10, choices=FlowScope.choices, default=FlowScope.ANY)
    is_generic = models.BooleanField(
        default=False, help_text="Serves any intent, at a reduced match score."
    )
    keywords_edited = models.BooleanField(
        default=False,
        help_text="Keywords were edited by hand; discovery will not overwrite them.",
    )
    scope_edited = models.BooleanField(
        default=False,
        help_text="The scope was set by hand; discovery will not derive it again.",
    )
    # Where temperature and max_tokens reach the flow: [parameter, node, field] triples
    # read at discovery (backends/adapters/traits.py).
    tunable = models.JSONField(default=list, blank=True)
    first_seen_at = models.DateTimeField(auto_now_add=True)
    last_seen_at = models.DateTimeField(auto_now_add=True)
    removed_at = models.DateTimeField(null=True, blank=True)

    objects = FlowQuerySet.as_manager()

    class Meta:
        ordering = ["backend__name", "name"]
        constraints = [
            models.UniqueConstraint(
                fields=["backend", "external_id"], name="flow_unique_per_backend"
            ),
            models.CheckConstraint(
                condition=models.Q(scope__in=FlowScope.values), name="flow_scope_valid"
            ),
        ]
        indexes = [
            # The routing candidate read: active, deployed flows per backend.
            models.Index(
                fields=["backend", "deployed"],
                name="flow_active_by_backend",
                condition=models.Q(removed_at__isnull=True),
            ),
        ]

    def __str__(self) -> str:
        return f"{self.name} on {self.backend.name}"

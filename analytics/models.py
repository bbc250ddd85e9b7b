"""What routing did: one decision per query, one record per attempt, and rollups."""

from __future__ import annotations

import uuid

from django.db import models

from backends.models import Backend
from chatflows.models import Flow
from flywheel.models import Tenant
from routing.models import Session

# Upper bounds, in ms, of the latency histogram kept in each rollup row; the
# last bucket counts everything slower than the last bound.
LATENCY_BUCKETS_MS = (50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000)


class IntentMethod(models.TextChoices):
    RULES = "rules", "Rules"
    CONTEXT = "context", "Conversation context"
    LLM = "llm", "LLM"
    OVERRIDE = "override", "Override"


class QueryType(models.TextChoices):
    GLOBAL = "GLOBAL", "Global"
    LOCAL = "LOCAL", "Local"
    HYBRID = "HYBRID", "Hybrid"


class RoutingMethod(models.TextChoices):
    AUTO = "auto", "Automatic"
    EXPLICIT = "explicit", "Explicit backend"


class Outcome(models.TextChoices):
    SUCCESS = "success", "Answered by the first choice"
    FALLBACK = "fallback", "Answered after a fallback"
    CACHED = "cached", "Answered from cache"
    FAILED = "failed", "Failed"
    REJECTED = "rejected", "Rejected before routing"


class RoutingDecision(models.Model):
    """Everything routing knew and did for one query; written exactly once per query."""

    request_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="decisions")
    session = models.ForeignKey(
        Session, on_delete=models.SET_NULL, null=True, blank=True, related_name="decisions"
    )
    question = models.TextField()
    intent = models.CharField(max_length=50, blank=True)
    intent_confidence = models.FloatField(null=True, blank=True)
    intent_method = models.CharField(max_length=10, choices=IntentMethod.choices, blank=True)
    query_type = models.CharField(max_length=10, choices=QueryType.choices, blank=True)
    query_type_confidence = models.FloatField(null=True, blank=True)
    evidence = models.JSONField(
        default=dict,
        blank=True,
        help_text="Why: the intent's matched patterns (or context), the query type's "
        "reasoning and weights.",
    )
    routing_method = models.CharField(
        max_length=10, choices=RoutingMethod.choices, default=RoutingMethod.AUTO
    )
    backend = models.ForeignKey(
        Backend, on_delete=models.SET_NULL, null=True, blank=True, related_name="decisions"
    )
    flow = models.ForeignKey(
        Flow, on_delete=models.SET_NULL, null=True, blank=True, related_name="decisions"
    )
    score = models.FloatField(null=True, blank=True)
    candidates = models.JSONField(
        default=list, blank=True, help_text="Each candidate with its factor scores."
    )
    fallback_chain = models.JSONField(
        default=list, blank=True, help_text="Each attempt, in order, with its outcome."
    )
    outcome = models.CharField(max_length=10, choices=Outcome.choices)
    error_type = models.CharField(max_length=50, blank=True)
    classify_ms = models.FloatField(default=0)
    route_ms = models.FloatField(default=0)
    execute_ms = models.FloatField(default=0)
    total_ms = models.FloatField(default=0)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        ordering = ["-created_at"]
        indexes = [
            models.Index(fields=["tenant", "-created_at"], name="decision_tenant_recent"),
        ]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(outcome__in=Outcome.values), name="decision_outcome_valid"
            ),
            models.CheckConstraint(
                condition=models.Q(
                    classify_ms__gte=0, route_ms__gte=0, execute_ms__gte=0, total_ms__gte=0
                ),
                name="decision_timings_non_negative",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.request_id} ({self.outcome})"


class PerformanceRecord(models.Model):
    """One attempt to run a flow, failed ones included; feeds the performance score."""

    backend = models.ForeignKey(Backend, on_delete=models.CASCADE, related_name="performance")
    flow = models.ForeignKey(
        Flow, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    decision = models.ForeignKey(
        RoutingDecision,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="attempts",
    )
    intent = models.CharField(max_length=50)
    latency_ms = models.FloatField()
    success = models.BooleanField()
    error_type = models.CharField(max_length=50, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]
        indexes = [
            # The hot read: the last N records for a backend + intent.
            models.Index(
                fields=["backend", "intent", "-created_at"], name="perf_backend_intent_recent"
            ),
        ]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(latency_ms__gte=0), name="perf_latency_non_negative"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.backend.name}/{self.intent}: {'ok' if self.success else self.error_type}"


class DecisionRollup(models.Model):
    """Decisions aggregated per hour, tenant, backend and intent, for the analytics pages.

    ``backend`` is empty for decisions that reached no backend. ``latency_histogram``
    holds one count per bound of LATENCY_BUCKETS_MS plus one for slower answers.
    """

    bucket_start = models.DateTimeField()
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="+")
    backend = models.ForeignKey(
        Backend, on_delete=models.CASCADE, null=True, blank=True, related_name="+"
    )
    intent = models.CharField(max_length=50, blank=True)
    count = models.PositiveIntegerField(default=0)
    successes = models.PositiveIntegerField(default=0)
    fallbacks = models.PositiveIntegerField(default=0)
    latency_sum_ms = models.FloatField(default=0)
    latency_histogram = models.JSONField(default=list, blank=True)

    class Meta:
        ordering = ["-bucket_start"]
        indexes = [
            models.Index(fields=["bucket_start", "tenant"], name="rollup_time_tenant"),
        ]
        constraints = [
            # Two partial constraints rather than nulls_distinct=False, which
            # SQLite (the zero-setup database) cannot enforce.
            models.UniqueConstraint(
                fields=["bucket_start", "tenant", "backend", "intent"],
                condition=models.Q(backend__isnull=False),
                name="rollup_unique_bucket",
            ),
            models.UniqueConstraint(
                fields=["bucket_start", "tenant", "intent"],
                condition=models.Q(backend__isnull=True),
                name="rollup_unique_bucket_no_backend",
            ),
            models.CheckConstraint(
                condition=models.Q(successes__lte=models.F("count")),
                name="rollup_successes_lte_count",
            ),
            models.CheckConstraint(
                condition=models.Q(fallbacks__lte=models.F("count")),
                name="rollup_fallbacks_lte_count",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.bucket_start:%Y-%m-%d %H:00} {self.intent or '-'}"

"""What routing did: one decision per query, one performance record per attempt."""

from __future__ import annotations

import uuid
from datetime import timedelta

from django.db import models
from django.utils import timezone

from backends.models import Backend
from chatflows.models import Flow
from flywheel import ids
from flywheel.fields import CompactJSONField, RealField
from flywheel.models import Tenant
from routing.models.sessions import Session

# RECORD_REFERENCE. The records written for every question (a decision, its
# performance records, its turn; the session with its first decision) refer to
# their session, decision, backend and flow without a constraint in the database.
# Django applies on_delete itself (deleting a backend deletes its performance
# records and clears its decisions' and turns' references, as before); the
# writer (routing/recording/batch_sql.py) writes a batch's sessions and decisions in the
# same statement as what refers to them, and refers only to backends and flows
# that exist. Checked by PostgreSQL, these ten references cost half of its CPU
# per question (a trigger each at commit). The tenant's references keep theirs:
# a decision for a tenant that does not exist is refused and set aside.


class IntentMethod(models.TextChoices):
    RULES = "rules", "Rules"
    CONTEXT = "context", "Conversation context"
    EXAMPLE = "example", "A question a person labelled"
    MODEL = "model", "Model learned from examples"
    LLM = "llm", "LLM"
    OVERRIDE = "override", "Override"
    DEFAULT = "default", "Default: no step was sure"


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
    ABANDONED = "abandoned", "Answered after the client had gone"


# What the client received an answer in (an abandoned answer was ready, but nobody got it).
ANSWERED_OUTCOMES = (Outcome.SUCCESS, Outcome.FALLBACK, Outcome.CACHED)


class RoutingDecision(models.Model):
    """Everything routing knew and did for one query; written exactly once per query.

    On PostgreSQL the table is partitioned by day on created_at (PARTITIONED below),
    so its keys hold created_at: the primary key is (id, created_at) there, and a
    request id is unique with its created_at (decision_request_once), which a write
    sets once (DecisionData.created_at) and a replay repeats.
    """

    # A version-7 UUID: it says when the question came (flywheel.ids.uuid7_time), which
    # tells a trace that expired from one that never was.
    request_id = models.UUIDField(default=ids.uuid7, editable=False)
    # Its index is decision_tenant_recent's first column.
    tenant = models.ForeignKey(
        Tenant, on_delete=models.CASCADE, related_name="decisions", db_index=False
    )
    # Every reference but the tenant's has no database constraint: see RECORD_REFERENCE.
    # Indexed where set only (decision_session): most questions come without one.
    session = models.ForeignKey(
        Session,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="decisions",
        db_constraint=False,
        db_index=False,
    )
    question = models.TextField()
    intent = models.CharField(max_length=50, blank=True)
    intent_confidence = RealField(null=True, blank=True)
    intent_method = models.CharField(max_length=10, choices=IntentMethod.choices, blank=True)
    query_type = models.CharField(max_length=10, choices=QueryType.choices, blank=True)
    query_type_confidence = RealField(null=True, blank=True)
    # Compact JSON text, not jsonb (flywheel.fields.CompactJSONField: a third of the size).
    evidence = CompactJSONField(
        default=dict,
        blank=True,
        help_text="Why: the intent's matched patterns (or context), the query type's "
        "reasoning and weights.",
    )
    routing_method = models.CharField(
        max_length=10, choices=RoutingMethod.choices, default=RoutingMethod.AUTO
    )
    backend = models.ForeignKey(
        Backend,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="decisions",
        db_constraint=False,
    )
    flow = models.ForeignKey(
        Flow,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="decisions",
        db_constraint=False,
    )
    score = RealField(null=True, blank=True)
    candidates = CompactJSONField(
        default=list, blank=True, help_text="Each candidate with its factor scores."
    )
    fallback_chain = CompactJSONField(
        default=list, blank=True, help_text="Each attempt, in order, with its outcome."
    )
    outcome = models.CharField(max_length=10, choices=Outcome.choices)
    error_type = models.CharField(max_length=50, blank=True)
    error_message = models.TextField(
        blank=True, default="", help_text="What the caller was told when no answer came."
    )
    corrected_intent = models.CharField(
        max_length=50,
        blank=True,
        default="",
        help_text="The intent an admin said it was (intent keeps what was detected); the "
        "question became a correction example.",
    )
    corrected_at = models.DateTimeField(null=True, blank=True)
    # Timings, scores and confidences in 4 bytes each (flywheel.fields.RealField).
    classify_ms = RealField(default=0)
    route_ms = RealField(default=0)
    execute_ms = RealField(default=0)
    total_ms = RealField(default=0)
    # When it was decided: set by the writer (DecisionData.created_at), now by default.
    created_at = models.DateTimeField(default=timezone.now, db_index=True)

    class Meta:
        # The analytics app created this table, and owned the model until routing took
        # it over (routing/migrations/0004): the table, its indexes and constraints
        # keep their names.
        db_table = "analytics_routingdecision"
        ordering = ["-created_at"]
        indexes = [
            # Ascending, read backwards for "newest first": each tenant's new rows go at
            # the end of its range, where PostgreSQL splits a full page leaving it
            # full; before its newest row in a descending index, it split them in half
            # (59 bytes a question then, 35 now: bench/storage.py).
            models.Index(fields=["tenant", "created_at"], name="decision_tenant_recent"),
            models.Index(
                fields=["session"],
                condition=models.Q(session__isnull=False),
                name="decision_session",
            ),
            # The few corrected decisions, found without reading the others.
            models.Index(
                fields=["created_at"],
                condition=models.Q(corrected_at__isnull=False),
                name="decision_corrected",
            ),
        ]
        constraints = [
            # With the partition key: a unique key of a partitioned table must hold it.
            models.UniqueConstraint(
                fields=["request_id", "created_at"], name="decision_request_once"
            ),
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
    """One attempt to run a flow, failed ones included; feeds the performance score.

    Partitioned by day on created_at on PostgreSQL, as RoutingDecision is."""

    # References without a database constraint (db_constraint=False): see RECORD_REFERENCE.
    # The backend's index is perf_backend_intent_recent's first column.
    backend = models.ForeignKey(
        Backend,
        on_delete=models.CASCADE,
        related_name="performance",
        db_constraint=False,
        db_index=False,
    )
    flow = models.ForeignKey(
        Flow,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
        db_constraint=False,
    )
    decision = models.ForeignKey(
        RoutingDecision,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="attempts",
        db_constraint=False,
    )
    intent = models.CharField(max_length=50)
    latency_ms = RealField()
    success = models.BooleanField()
    error_type = models.CharField(max_length=50, blank=True)
    # What the backend reported using, where it did (Flowise and Langflow report tokens
    # for flows with LLM nodes, and no cost); null: not reported.
    prompt_tokens = models.PositiveIntegerField(null=True, blank=True)
    completion_tokens = models.PositiveIntegerField(null=True, blank=True)
    total_tokens = models.PositiveIntegerField(null=True, blank=True)
    cost = models.FloatField(null=True, blank=True, help_text="As the backend reported it.")
    # When the attempt ended (routing.selection.attempt.Attempt.ended_at), else when
    # the record was written.
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        db_table = "analytics_performancerecord"  # as RoutingDecision's, see there
        ordering = ["-created_at"]
        indexes = [
            # The hot read: the last N records for a backend + intent.
            # Ascending, read backwards, as decision_tenant_recent (and why).
            models.Index(
                fields=["backend", "intent", "created_at"], name="perf_backend_intent_recent"
            ),
        ]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(latency_ms__gte=0), name="perf_latency_non_negative"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.backend.name}/{self.intent}: {'ok' if self.success else self.error_type}"


# How far a host's clock may step back between a query's start and its decision.
CLOCK_MARGIN = timedelta(minutes=10)


def with_request_id(
    decisions: models.QuerySet[RoutingDecision], key: uuid.UUID
) -> models.QuerySet[RoutingDecision]:
    """The decisions of that request id. A version-7 id says when its question came, and
    its decision was made within the query's budget after: only that day's partitions
    are read (on PostgreSQL) instead of each one's index."""
    found = decisions.filter(request_id=key)
    came = ids.uuid7_time(key)
    if came is None:
        return found
    return found.filter(created_at__gte=came - CLOCK_MARGIN, created_at__lt=came + timedelta(1))

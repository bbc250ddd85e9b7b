"""Rollups of what routing did, for the analytics pages.

The decisions and attempts themselves are routing's (routing.models): routing
writes them, analytics only reads them.
"""

from __future__ import annotations

from django.db import models

from backends.models import Backend
from flywheel.models import Tenant

# Upper bounds, in ms, of the latency histogram kept in each rollup row; the
# last bucket counts everything slower than the last bound.
LATENCY_BUCKETS_MS = (50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000)


class Granularity(models.TextChoices):
    MINUTE = "minute", "Minute"
    HOUR = "hour", "Hour"


class DecisionRollup(models.Model):
    """Decisions aggregated per bucket (a minute or an hour), tenant, backend and intent.

    Two kinds of row, told apart by ``backend``:

    - with a backend, ATTEMPT level: the performance records on that backend, bucketed
      by their decision's ``created_at`` (tenant and intent from the decision).
      ``count`` = attempts, ``successes`` = successful attempts, ``fallbacks`` = failed
      attempts whose decision was still answered (outcome fallback or cached), latency
      = the attempts'. ``won`` = decisions answered through this backend
      (decision.backend), ``score_sum`` / ``scored`` = their scores, where set.
    - with no backend, the intent's DECISION-level totals: ``count`` = decisions,
      ``successes`` = answered (success, fallback or cached), ``fallbacks`` = outcome
      fallback, ``cached`` = outcome cached, latency = the decisions' ``total_ms``.

    ``tokens_sum`` / ``tokens_counted`` and ``cost_sum`` / ``cost_counted`` (attempt level
    only) add up the usage backends reported, over the attempts that reported it.
    ``methods`` (decision level only) counts the decisions per classification method
    (IntentMethod: rules, model, default, ...). ``latency_histogram`` holds one count
    per bound of LATENCY_BUCKETS_MS (a value counts under the first bound it does not
    exceed) plus one for slower ones.
    analytics.rollups writes these rows; minute rows are kept for 48 hours.
    """

    granularity = models.CharField(
        max_length=6, choices=Granularity.choices, default=Granularity.HOUR
    )
    bucket_start = models.DateTimeField()
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="+")
    backend = models.ForeignKey(
        Backend, on_delete=models.CASCADE, null=True, blank=True, related_name="+"
    )
    intent = models.CharField(max_length=50, blank=True)
    count = models.PositiveIntegerField(default=0)
    successes = models.PositiveIntegerField(default=0)
    fallbacks = models.PositiveIntegerField(default=0)
    cached = models.PositiveIntegerField(default=0)
    latency_sum_ms = models.FloatField(default=0)
    latency_histogram = models.JSONField(default=list, blank=True)
    methods = models.JSONField(default=dict, blank=True)
    won = models.PositiveIntegerField(default=0)
    score_sum = models.FloatField(default=0)
    scored = models.PositiveIntegerField(default=0)
    tokens_sum = models.PositiveBigIntegerField(default=0)
    tokens_counted = models.PositiveIntegerField(default=0)
    cost_sum = models.FloatField(default=0)
    cost_counted = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["-bucket_start"]
        indexes = [
            models.Index(
                fields=["granularity", "bucket_start", "tenant"], name="rollup_grain_time_tenant"
            ),
        ]
        constraints = [
            # Two partial constraints rather than nulls_distinct=False, which
            # SQLite (the zero-setup database) cannot enforce.
            models.UniqueConstraint(
                fields=["granularity", "bucket_start", "tenant", "backend", "intent"],
                condition=models.Q(backend__isnull=False),
                name="rollup_unique_bucket",
            ),
            models.UniqueConstraint(
                fields=["granularity", "bucket_start", "tenant", "intent"],
                condition=models.Q(backend__isnull=True),
                name="rollup_unique_bucket_no_backend",
            ),
            models.CheckConstraint(
                condition=models.Q(granularity__in=Granularity.values),
                name="rollup_granularity_valid",
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
        return f"{self.granularity} {self.bucket_start:%Y-%m-%d %H:%M} {self.intent or '-'}"


class RollupState(models.Model):
    """How far the rollups have read: one row (pk 1).

    Decisions with an id above ``last_decision_id`` are not in any rollup row yet;
    the analytics reads add them from the raw rows. ``raw_since``: where the raw rows
    start since the retention last cut them (analytics.retention); a bucket before it
    is never recomputed from what is left of them.
    """

    id = models.PositiveSmallIntegerField(primary_key=True, default=1, editable=False)
    last_decision_id = models.BigIntegerField(default=0)
    refreshed_at = models.DateTimeField(null=True, blank=True)
    raw_since = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name = "rollup state"
        verbose_name_plural = "rollup state"
        constraints = [
            models.CheckConstraint(condition=models.Q(id=1), name="rollupstate_single_row"),
        ]

    def __str__(self) -> str:
        return f"Rolled up to decision {self.last_decision_id}"

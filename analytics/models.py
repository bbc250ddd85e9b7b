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

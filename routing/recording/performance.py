"""Performance aggregates read back from the stored attempts, and shared with every process."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta

from django.db import connection
from django.db.models import QuerySet
from django.utils import timezone

from routing.models import (
    PerformanceRecord,
)
from routing.recording.batch_sql import recent_attempts
from routing.selection.scoring import Performance
from routing.selection.state import (
    PERFORMANCE_TTL_SECONDS,
    policy_values,
    publish_performances,
)

Pair = tuple[int, str]  # (backend id, intent)


_Recent = tuple[int, str, bool, float, datetime, int | None]


def performance_of(backend_id: int, intent: str, window: int) -> Performance:
    """Success rate, mean latency and mean reported tokens over the last ``window``
    attempts made within the policy's performance_max_age_seconds (one indexed read): an
    attempt routing no longer counts must not drag down the measure of a backend that
    has healed."""
    return performances_of({(backend_id, intent)}, window)[(backend_id, intent)]


def performances_of(pairs: Iterable[Pair], window: int) -> dict[Pair, Performance]:
    """performance_of for each backend + intent of ``pairs``, in one statement on
    PostgreSQL (routing.recording.batch_sql.recent_attempts); one read each elsewhere."""
    since = timezone.now() - timedelta(seconds=policy_values().performance_max_age_seconds)

    def recent(pair: Pair) -> QuerySet[PerformanceRecord, _Recent]:
        backend_id, intent = pair
        return (
            PerformanceRecord.objects.filter(
                backend_id=backend_id, intent=intent, created_at__gte=since
            )
            .order_by("-created_at")
            .values_list(
                "backend_id", "intent", "success", "latency_ms", "created_at", "total_tokens"
            )[:window]
        )

    ordered = sorted(set(pairs))
    rows: list[_Recent]
    if connection.vendor == "postgresql":
        rows = recent_attempts(ordered, since, window)
    else:
        rows = [row for pair in ordered for row in recent(pair)]
    found: dict[Pair, list[_Recent]] = {pair: [] for pair in ordered}
    for row in rows:
        found[(row[0], row[1])].append(row)
    return {pair: _performance(records) for pair, records in found.items()}


def _performance(recent: list[_Recent]) -> Performance:
    if not recent:
        return Performance(attempts=0, success_rate=0.0, avg_latency_ms=0.0)
    tokens = [row[5] for row in recent if row[5] is not None]
    return Performance(
        attempts=len(recent),
        success_rate=sum(row[2] for row in recent) / len(recent),
        avg_latency_ms=sum(row[3] for row in recent) / len(recent),
        last_at=max(row[4] for row in recent),
        avg_tokens=sum(tokens) / len(tokens) if tokens else None,
    )


def performance_publish_all(*, window: int) -> int:
    """Publish again the aggregate of every backend + intent attempted within the
    aggregates' lifetime (beat runs this), so that a cache that lost them (a Redis
    restart, an expiry) does not leave routing blind to history. Returns how many."""
    since = timezone.now() - timedelta(seconds=PERFORMANCE_TTL_SECONDS)
    pairs = (
        PerformanceRecord.objects.filter(created_at__gte=since)
        .values_list("backend_id", "intent")
        .order_by()  # the model's ordering (created_at) would make every record distinct
        .distinct()
    )
    aggregates = performances_of(pairs, window)
    publish_performances(aggregates)
    return len(aggregates)

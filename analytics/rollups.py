"""Decisions rolled up per minute and per hour (DecisionRollup), incrementally.

:func:`aggregate` turns a set of decisions into rollup tallies; the refresh
stores them and the analytics reads (analytics.reads) use it too for the
decisions not rolled up yet, so both count the same way. It is plain ORM
aggregation (Trunc, conditional Count and Sum): PostgreSQL and SQLite alike.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from django.db import transaction
from django.db.models import Count, FloatField, Max, Q, QuerySet, Sum
from django.db.models.functions import Cast, Trunc
from django.utils import timezone

from analytics.models import LATENCY_BUCKETS_MS, DecisionRollup, Granularity, RollupState
from routing.models import (
    ANSWERED_OUTCOMES,
    IntentMethod,
    Outcome,
    PerformanceRecord,
    RoutingDecision,
)

# Decision batches commit out of id order (two writer threads, several processes): a
# decision may land below the last id read by up to a batch's lifetime, well under a
# second. Every refresh also recomputes the last LAG of minutes, so it is counted.
LAG = timedelta(minutes=3)
MINUTE_RETENTION = timedelta(hours=48)
STEP: dict[str, timedelta] = {
    Granularity.MINUTE: timedelta(minutes=1),
    Granularity.HOUR: timedelta(hours=1),
}
# Past this many separate spans of buckets, one span from the first to the last is
# recomputed instead: the same rows, in one range scan rather than a long OR.
MAX_SPANS = 50

METHODS = tuple(IntentMethod.values)
# (bucket start, tenant id, backend id or None for the intent's totals, intent)
Key = tuple[datetime, int, int | None, str]


@dataclass
class Tally:
    """The counters of one rollup row (see DecisionRollup for what each one means)."""

    count: int = 0
    successes: int = 0
    fallbacks: int = 0
    cached: int = 0
    latency_sum_ms: float = 0.0
    histogram: list[int] = field(default_factory=lambda: [0] * (len(LATENCY_BUCKETS_MS) + 1))
    won: int = 0
    score_sum: float = 0.0
    scored: int = 0
    tokens_sum: int = 0
    tokens_counted: int = 0
    cost_sum: float = 0.0
    cost_counted: int = 0
    methods: dict[str, int] = field(default_factory=dict)  # decisions per intent method

    def add(self, other: Tally) -> None:
        self.count += other.count
        self.successes += other.successes
        self.fallbacks += other.fallbacks
        self.cached += other.cached
        self.latency_sum_ms += other.latency_sum_ms
        self.histogram = [a + b for a, b in zip(self.histogram, other.histogram, strict=True)]
        self.won += other.won
        self.score_sum += other.score_sum
        self.scored += other.scored
        self.tokens_sum += other.tokens_sum
        self.tokens_counted += other.tokens_counted
        self.cost_sum += other.cost_sum
        self.cost_counted += other.cost_counted
        for method, n in other.methods.items():
            self.methods[method] = self.methods.get(method, 0) + n

    @classmethod
    def of_row(cls, row: DecisionRollup) -> Tally:
        histogram = list(row.latency_histogram) or [0] * (len(LATENCY_BUCKETS_MS) + 1)
        return cls(
            count=row.count,
            successes=row.successes,
            fallbacks=row.fallbacks,
            cached=row.cached,
            latency_sum_ms=row.latency_sum_ms,
            histogram=histogram,
            won=row.won,
            score_sum=row.score_sum,
            scored=row.scored,
            tokens_sum=row.tokens_sum,
            tokens_counted=row.tokens_counted,
            cost_sum=row.cost_sum,
            cost_counted=row.cost_counted,
            methods=dict(row.methods),
        )

    def as_row(self, key: Key, granularity: str) -> DecisionRollup:
        bucket_start, tenant_id, backend_id, intent = key
        return DecisionRollup(
            granularity=granularity,
            bucket_start=bucket_start,
            tenant_id=tenant_id,
            backend_id=backend_id,
            intent=intent,
            count=self.count,
            successes=self.successes,
            fallbacks=self.fallbacks,
            cached=self.cached,
            latency_sum_ms=self.latency_sum_ms,
            latency_histogram=self.histogram,
            won=self.won,
            score_sum=self.score_sum,
            scored=self.scored,
            tokens_sum=self.tokens_sum,
            tokens_counted=self.tokens_counted,
            cost_sum=self.cost_sum,
            cost_counted=self.cost_counted,
            methods=self.methods,
        )


def bucket_floor(moment: datetime, granularity: str) -> datetime:
    """The start (UTC) of the bucket ``moment`` falls in."""
    moment = moment.astimezone(UTC).replace(second=0, microsecond=0)
    return moment.replace(minute=0) if granularity == Granularity.HOUR else moment


def _histogram(column: str) -> dict[str, Count]:
    """One conditional count per latency bucket: h0 .. hN (N: the overflow)."""
    counts: dict[str, Count] = {}
    lower: float | None = None
    for i, bound in enumerate(LATENCY_BUCKETS_MS):
        within = Q(**{f"{column}__lte": bound})
        counts[f"h{i}"] = Count(
            "pk", filter=within if lower is None else within & Q(**{f"{column}__gt": lower})
        )
        lower = bound
    counts[f"h{len(LATENCY_BUCKETS_MS)}"] = Count("pk", filter=Q(**{f"{column}__gt": lower}))
    return counts


def _bucket(column: str, granularity: str) -> Trunc:
    return Trunc(column, granularity, tzinfo=UTC)


def _sum(column: str) -> Sum:
    """The sum of a real (4-byte) column, added in double precision: PostgreSQL adds
    reals as real, and a minute's latencies lose their milliseconds past 2**24."""
    return Sum(Cast(column, FloatField()))


def _histogram_of(row: dict[str, Any]) -> list[int]:
    return [row[f"h{i}"] for i in range(len(LATENCY_BUCKETS_MS) + 1)]


def aggregate(decisions: QuerySet[RoutingDecision], granularity: str) -> dict[Key, Tally]:
    """The rollup tallies of ``decisions`` (and their attempts) per bucket: three
    grouped queries, whatever the number of decisions."""
    tallies: dict[Key, Tally] = {}
    totals = (
        decisions.annotate(bucket=_bucket("created_at", granularity))
        .values("bucket", "tenant_id", "intent")
        .order_by()
        .annotate(
            n=Count("pk"),
            ok=Count("pk", filter=Q(outcome__in=ANSWERED_OUTCOMES)),
            fell_back=Count("pk", filter=Q(outcome=Outcome.FALLBACK)),
            from_cache=Count("pk", filter=Q(outcome=Outcome.CACHED)),
            latency=_sum("total_ms"),
            **_histogram("total_ms"),
            **{f"m_{method}": Count("pk", filter=Q(intent_method=method)) for method in METHODS},
        )
    )
    for row in totals:
        tallies[(row["bucket"], row["tenant_id"], None, row["intent"])] = Tally(
            count=row["n"],
            successes=row["ok"],
            fallbacks=row["fell_back"],
            cached=row["from_cache"],
            latency_sum_ms=row["latency"] or 0.0,
            histogram=_histogram_of(row),
            methods={m: row[f"m_{m}"] for m in METHODS if row[f"m_{m}"]},
        )
    attempts = (
        PerformanceRecord.objects.filter(decision__in=decisions.values("pk"))
        .annotate(bucket=_bucket("decision__created_at", granularity))
        .values("bucket", "decision__tenant_id", "backend_id", "decision__intent")
        .order_by()
        .annotate(
            n=Count("pk"),
            ok=Count("pk", filter=Q(success=True)),
            rescued=Count(
                "pk",
                filter=Q(success=False, decision__outcome__in=[Outcome.FALLBACK, Outcome.CACHED]),
            ),
            latency=_sum("latency_ms"),
            **_histogram("latency_ms"),
            token_total=Sum("total_tokens"),
            with_tokens=Count("total_tokens"),
            cost_total=Sum("cost"),
            with_cost=Count("cost"),
        )
    )
    for row in attempts:
        key = (
            row["bucket"],
            row["decision__tenant_id"],
            row["backend_id"],
            row["decision__intent"],
        )
        tallies[key] = Tally(
            count=row["n"],
            successes=row["ok"],
            fallbacks=row["rescued"],
            latency_sum_ms=row["latency"] or 0.0,
            histogram=_histogram_of(row),
            tokens_sum=row["token_total"] or 0,
            tokens_counted=row["with_tokens"],
            cost_sum=row["cost_total"] or 0.0,
            cost_counted=row["with_cost"],
        )
    wins = (
        decisions.filter(backend__isnull=False)
        .annotate(bucket=_bucket("created_at", granularity))
        .values("bucket", "tenant_id", "backend_id", "intent")
        .order_by()
        .annotate(n=Count("pk"), score_total=_sum("score"), with_score=Count("score"))
    )
    for row in wins:
        key = (row["bucket"], row["tenant_id"], row["backend_id"], row["intent"])
        tally = tallies.setdefault(key, Tally())
        tally.won, tally.scored = row["n"], row["with_score"]
        tally.score_sum = row["score_total"] or 0.0
    return tallies


def _spans(buckets: Iterable[datetime], step: timedelta) -> list[tuple[datetime, datetime]]:
    """Consecutive buckets merged into [start, end) spans (one span if there are many)."""
    spans: list[tuple[datetime, datetime]] = []
    for start in sorted(buckets):
        if spans and spans[-1][1] == start:
            spans[-1] = (spans[-1][0], start + step)
        else:
            spans.append((start, start + step))
    if len(spans) > MAX_SPANS:
        spans = [(spans[0][0], spans[-1][1])]
    return spans


def _within(spans: list[tuple[datetime, datetime]], column: str) -> Q:
    found = Q(pk__in=[])
    for start, end in spans:
        found |= Q(**{f"{column}__gte": start, f"{column}__lt": end})
    return found


def _affected_minutes(last: int, top: int, now: datetime) -> set[datetime]:
    """The minutes of the decisions read for the first time, and the last LAG's."""
    minutes = set(
        RoutingDecision.objects.filter(pk__gt=last, pk__lte=top)
        .annotate(bucket=_bucket("created_at", Granularity.MINUTE))
        .values_list("bucket", flat=True)
        .order_by()
        .distinct()
    )
    minute = bucket_floor(now - LAG, Granularity.MINUTE)
    while minute <= now:
        minutes.add(minute)
        minute += STEP[Granularity.MINUTE]
    return minutes


def _recompute(granularity: str, buckets: set[datetime], top: int) -> int:
    """Replace the rollup rows of ``buckets`` with tallies of the decisions up to ``top``."""
    if not buckets:
        return 0
    spans = _spans(buckets, STEP[granularity])
    DecisionRollup.objects.filter(_within(spans, "bucket_start"), granularity=granularity).delete()
    decisions = RoutingDecision.objects.filter(_within(spans, "created_at"), pk__lte=top)
    rows = [
        tally.as_row(key, granularity) for key, tally in aggregate(decisions, granularity).items()
    ]
    DecisionRollup.objects.bulk_create(rows, batch_size=1000)
    return len(rows)


def rollups_refresh(*, now: datetime | None = None) -> dict[str, Any]:
    """Bring the rollup rows up to date with the decisions written since the last refresh.

    Idempotent: the rows of every affected bucket are recomputed from the raw rows,
    never added to, so running it twice (or concurrently: the state row is locked)
    counts nothing twice; a decision written late lands in its own bucket. Minute
    rows older than 48 hours are pruned. Returns what it did: the decisions read,
    the minutes and hours recomputed, the rows written and the rows pruned.
    """
    now = now or timezone.now()
    RollupState.objects.get_or_create(pk=1)
    with transaction.atomic():
        state = RollupState.objects.select_for_update().get(pk=1)
        last = state.last_decision_id
        top = max(RoutingDecision.objects.aggregate(top=Max("pk"))["top"] or 0, last)
        read = RoutingDecision.objects.filter(pk__gt=last, pk__lte=top).count()
        # A bucket is recomputed only while every raw row of it is kept: one the
        # retention has cut into keeps its rollups (a straggler written that late is
        # not counted).
        raw_since = state.raw_since or datetime.min.replace(tzinfo=UTC)
        minutes = {m for m in _affected_minutes(last, top, now) if m >= raw_since}
        hours = {bucket_floor(minute, Granularity.HOUR) for minute in minutes}
        hours = {h for h in hours if h >= raw_since}
        kept_since = now - MINUTE_RETENTION  # older minute rows would be pruned at once
        written = _recompute(Granularity.MINUTE, {m for m in minutes if m >= kept_since}, top)
        written += _recompute(Granularity.HOUR, hours, top)
        pruned, _ = DecisionRollup.objects.filter(
            granularity=Granularity.MINUTE, bucket_start__lt=kept_since
        ).delete()
        state.last_decision_id, state.refreshed_at = top, now
        state.save(update_fields=["last_decision_id", "refreshed_at"])
    return {
        "decisions": read,
        "last_decision_id": top,
        "minutes": len(minutes),
        "hours": len(hours),
        "rows": written,
        "pruned": pruned,
    }

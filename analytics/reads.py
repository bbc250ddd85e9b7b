"""Reads of the rollups: backends per intent, and time series per backend.

Each read takes the rollup rows of its range plus the decisions not rolled up
yet (id above RollupState.last_decision_id), aggregated by the same code as
the rollup (analytics.rollups.aggregate): its cost follows the number of
rollup rows and the short tail, not the raw rows. ``tenant=None`` reads every
tenant (staff); otherwise one tenant's.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from django.db.models import IntegerField, Subquery, Sum
from django.db.models.fields.json import KT
from django.db.models.functions import Cast
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from analytics.filters import AnalyticsQuery
from analytics.models import LATENCY_BUCKETS_MS, DecisionRollup, Granularity, RollupState
from analytics.preference import preferred
from analytics.rollups import METHODS, MINUTE_RETENTION, STEP, Tally, aggregate, bucket_floor
from backends.models import Backend
from flywheel.contract import validated_filters
from flywheel.errors import ValidationError
from flywheel.jsonin import string_problem
from flywheel.models import Tenant
from routing.models import RoutingDecision

DEFAULT_RANGE = timedelta(hours=24)
MAX_RANGE = timedelta(days=90)
EARLIEST = datetime(1970, 1, 1, tzinfo=UTC)
LATEST = datetime(9999, 1, 1, tzinfo=UTC)
MINUTE_RANGE = timedelta(hours=6)  # up to this, minute buckets; past it, hour buckets


@dataclass(frozen=True)
class Window:
    """A read's range, widened to whole buckets: [start, end)."""

    start: datetime
    end: datetime
    granularity: str


def _refuse(name: str, rule: str) -> ValidationError:
    return ValidationError(f"The {name} parameter is not valid.", details={"fields": {name: rule}})


def _moment(value: str | datetime | None, name: str) -> datetime | None:
    if value is None or isinstance(value, datetime):
        moment = value
    else:
        try:
            moment = parse_datetime(value) if not string_problem(value) else None
        except ValueError:
            moment = None
        if moment is None:
            raise _refuse(name, "Must be an ISO 8601 date and time, such as 2025-01-31T12:00:00Z.")
    if moment is not None and timezone.is_naive(moment):
        moment = moment.replace(tzinfo=UTC)  # a time without an offset is UTC
    return moment


def _clamped(moment: datetime) -> datetime:
    # Nothing is recorded outside these years; reading within them keeps the bucket
    # arithmetic (a bucket after the end) inside what datetime can hold.
    return min(max(moment, EARLIEST), LATEST)


def window_of(
    since: str | datetime | None, until: str | datetime | None, *, now: datetime | None = None
) -> Window:
    """The range to read: the last 24 hours by default, at most 90 days; minute buckets
    up to 6 hours (within the 48 hours minute rows are kept), else hour buckets.

    Raises ValidationError naming ``since`` or ``until``.
    """
    now = now or timezone.now()
    end = _moment(until, "until") or now
    start = _moment(since, "since")
    if start is not None and start >= end:
        raise _refuse("since", "Must be before until.")
    if start is not None and end - start > MAX_RANGE:
        raise _refuse("since", "Must be at most 90 days before until.")
    end = _clamped(end)
    start = _clamped(start if start is not None else end - DEFAULT_RANGE)
    if start >= end:  # both before the earliest year: an empty minute there
        end = start + STEP[Granularity.MINUTE]
    minute = end - start <= MINUTE_RANGE and start >= now - MINUTE_RETENTION
    granularity = Granularity.MINUTE if minute else Granularity.HOUR
    last = bucket_floor(end, granularity)
    return Window(
        start=bucket_floor(start, granularity),
        end=last if last == end else last + STEP[granularity],
        granularity=granularity,
    )


# What a read may group its tallies by: a Key's parts, by name, and their columns.
GROUPS = {
    "bucket": "bucket_start",
    "tenant": "tenant_id",
    "backend": "backend_id",
    "intent": "intent",
}
KEY_PARTS = ("bucket", "tenant", "backend", "intent")  # the order of a Key
COUNTERS = (
    "count",
    "successes",
    "fallbacks",
    "cached",
    "latency_sum_ms",
    "won",
    "score_sum",
    "scored",
    "tokens_sum",
    "tokens_counted",
    "cost_sum",
    "cost_counted",
)
Grouped = tuple[Any, ...]


def _sums() -> dict[str, Any]:
    """The counters of a rollup row, summed: one SQL aggregate per counter and per
    histogram bucket, so a read returns one row per group, not one per stored row."""
    sums: dict[str, Any] = {f"sum_{name}": Sum(name) for name in COUNTERS}
    for i in range(len(LATENCY_BUCKETS_MS) + 1):
        sums[f"h{i}"] = Sum(Cast(KT(f"latency_histogram__{i}"), IntegerField()))
    for method in METHODS:
        sums[f"m_{method}"] = Sum(Cast(KT(f"methods__{method}"), IntegerField()))
    return sums


def _tally(row: dict[str, Any]) -> Tally:
    counters = {name: row[f"sum_{name}"] or 0 for name in COUNTERS}
    histogram = [row[f"h{i}"] or 0 for i in range(len(LATENCY_BUCKETS_MS) + 1)]
    methods = {method: row[f"m_{method}"] for method in METHODS if row[f"m_{method}"]}
    return Tally(**counters, histogram=histogram, methods=methods)


def tallies(
    *,
    tenant: Tenant | None,
    window: Window,
    intent: str | None = None,
    by: tuple[str, ...] = KEY_PARTS,
) -> dict[Grouped, Tally]:
    """The window's tallies grouped by ``by`` (parts of a Key: bucket, tenant, backend,
    intent; keys hold them in that order): the rollup rows, summed by the database,
    plus the decisions not rolled up yet."""
    columns = [GROUPS[part] for part in by]
    # The state is read in the same statement as the rows (a scalar subquery beside the
    # groups): a refresh committing between two reads cannot make the tail overlap them.
    upto = RollupState.objects.filter(pk=1).values("last_decision_id")
    read_before = upto.first()
    rows = (
        DecisionRollup.objects.filter(
            granularity=window.granularity,
            bucket_start__gte=window.start,
            bucket_start__lt=window.end,
        )
        .annotate(upto=Subquery(upto))
        .order_by()  # no sort for the model's ordering
    )
    tail = RoutingDecision.objects.filter(created_at__gte=window.start, created_at__lt=window.end)
    if tenant is not None:
        rows, tail = rows.filter(tenant=tenant), tail.filter(tenant=tenant)
    if intent:
        rows, tail = rows.filter(intent=intent), tail.filter(intent=intent)
    found: dict[Grouped, Tally] = {}
    last: int = read_before["last_decision_id"] if read_before else 0
    for row in rows.values(*columns, "upto").annotate(**_sums()):
        last = row["upto"] or 0
        found[tuple(row[column] for column in columns)] = _tally(row)
    picks = [KEY_PARTS.index(part) for part in by]
    for key, tally in aggregate(tail.filter(pk__gt=last), window.granularity).items():
        found.setdefault(tuple(key[i] for i in picks), Tally()).add(tally)
    return found


def quantile_ms(histogram: list[int], q: float) -> float | None:
    """The ``q`` quantile of a latency histogram (None when it is empty): interpolated
    inside the bucket where the cumulative count reaches it; in the overflow bucket,
    its lower bound (the histogram knows nothing above it)."""
    total = sum(histogram)
    if not total:
        return None
    target, seen = q * total, 0
    for i, n in enumerate(histogram):
        if n and seen + n >= target:
            if i == len(LATENCY_BUCKETS_MS):
                return float(LATENCY_BUCKETS_MS[-1])
            lower = LATENCY_BUCKETS_MS[i - 1] if i else 0
            return lower + (LATENCY_BUCKETS_MS[i] - lower) * (target - seen) / n
        seen += n
    return float(LATENCY_BUCKETS_MS[-1])  # not reached: q <= 1


def _rate(part: float, whole: float) -> float | None:
    return round(part / whole, 4) if whole else None


def _mean(total: float, count: int, digits: int) -> float | None:
    return round(total / count, digits) if count else None


def _ms(value: float | None) -> float | None:
    return None if value is None else round(value, 1)


def _backend_stats(name: str, tally: Tally, decisions: int) -> dict[str, Any]:
    return {
        "backend": name,
        "requests": tally.count,
        "success_rate": _rate(tally.successes, tally.count),
        "fallback_rate": _rate(tally.fallbacks, tally.count),
        "p50_ms": _ms(quantile_ms(tally.histogram, 0.5)),
        "p95_ms": _ms(quantile_ms(tally.histogram, 0.95)),
        "mean_score": _rate(tally.score_sum, tally.scored),
        "won": tally.won,
        "share": _rate(tally.won, decisions),
        "avg_tokens": _mean(tally.tokens_sum, tally.tokens_counted, 1),
        "avg_cost": _mean(tally.cost_sum, tally.cost_counted, 6),
    }


def _names(backend_ids: Iterable[int | None]) -> dict[int, str]:
    ids = {backend_id for backend_id in backend_ids if backend_id is not None}
    return dict(Backend.objects.filter(pk__in=ids).values_list("pk", "name"))


def backends_by_intent(
    *,
    tenant: Tenant | None,
    since: str | datetime | None = None,
    until: str | datetime | None = None,
    intent: str | None = None,
) -> dict[str, Any]:
    """Per intent, its totals (decisions, answered, cached), per backend: requests
    (attempts), success and fallback rates, p50 and p95 latency, mean score and share
    of the intent's decisions; and ``preferred``: the backend routing would try first
    now, and why (analytics.preference). Raises ValidationError naming the bad
    parameter."""
    validated_filters(AnalyticsQuery, intent=intent)
    window = window_of(since, until)
    found = tallies(tenant=tenant, window=window, intent=intent, by=("backend", "intent"))
    return _by_intent(found, window, tenant)


def _project(found: dict[Grouped, Tally], picks: tuple[int, ...]) -> dict[Grouped, Tally]:
    """Tallies regrouped by some of their key's parts (by position), summed."""
    regrouped: dict[Grouped, Tally] = defaultdict(Tally)
    for key, tally in found.items():
        regrouped[tuple(key[i] for i in picks)].add(tally)
    return regrouped


def _by_intent(
    found: dict[Grouped, Tally], window: Window, tenant: Tenant | None
) -> dict[str, Any]:
    """backends_by_intent's answer from tallies keyed (backend, intent)."""
    per_intent: dict[str, Tally] = defaultdict(Tally)
    per_backend: dict[tuple[str, int], Tally] = defaultdict(Tally)
    for (backend_id, slug), tally in found.items():
        if backend_id is None:
            per_intent[slug].add(tally)
        else:
            per_backend[(slug, backend_id)].add(tally)
    names = _names(backend_id for backend_id, _ in found)
    intents = []
    for slug in sorted(set(per_intent) | {slug for slug, _ in per_backend}):
        totals = per_intent[slug]
        backends = [
            _backend_stats(names.get(backend_id, str(backend_id)), tally, totals.count)
            for (of, backend_id), tally in per_backend.items()
            if of == slug
        ]
        backends.sort(key=lambda b: (-b["requests"], b["backend"]))
        intents.append(
            {
                "intent": slug,
                "decisions": totals.count,
                "answered": totals.successes,
                "cached": totals.cached,
                "backends": backends,
                "preferred": preferred(tenant_id=tenant.pk if tenant else None, intent=slug),
            }
        )
    return {**_range(window), "intents": intents}


def _range(window: Window) -> dict[str, Any]:
    return {"since": window.start, "until": window.end, "granularity": window.granularity}


def timeseries(
    *,
    tenant: Tenant | None,
    since: str | datetime | None = None,
    until: str | datetime | None = None,
    intent: str | None = None,
    backend: str | None = None,
) -> dict[str, Any]:
    """Per backend (by name, when given), its buckets with data: requests (attempts),
    success rate and p95 latency; minute buckets up to 6 hours, else hour buckets.
    Raises ValidationError naming the bad parameter."""
    validated_filters(AnalyticsQuery, intent=intent, backend=backend)
    window = window_of(since, until)
    found = tallies(tenant=tenant, window=window, intent=intent, by=("bucket", "backend"))
    return _series(found, window, backend)


def _series(found: dict[Grouped, Tally], window: Window, backend: str | None) -> dict[str, Any]:
    """timeseries' answer from tallies keyed (bucket, backend)."""
    series: dict[int, dict[datetime, Tally]] = defaultdict(lambda: defaultdict(Tally))
    for (start, backend_id), tally in found.items():
        if backend_id is not None:
            series[backend_id][start].add(tally)
    names = _names(series)
    backends = []
    for backend_id, buckets in series.items():
        name = names.get(backend_id, str(backend_id))
        if backend and name.lower() != backend.lower():
            continue
        points = [
            {
                "start": start,
                "requests": tally.count,
                "success_rate": _rate(tally.successes, tally.count),
                "p95_ms": _ms(quantile_ms(tally.histogram, 0.95)),
            }
            for start, tally in sorted(buckets.items())
        ]
        backends.append({"backend": name, "buckets": points})
    backends.sort(key=lambda series: str(series["backend"]))
    return {**_range(window), "backends": backends}


def overview(
    *,
    tenant: Tenant | None,
    since: str | datetime | None = None,
    until: str | datetime | None = None,
    intent: str | None = None,
) -> dict[str, Any]:
    """What the analytics page shows, read once: ``{"window", "by_intent", "timeseries"}``
    as backends_by_intent and timeseries answer them. Raises ValidationError."""
    validated_filters(AnalyticsQuery, intent=intent)
    window = window_of(since, until)
    found = tallies(tenant=tenant, window=window, intent=intent, by=("bucket", "backend", "intent"))
    return {
        "window": window,
        "by_intent": _by_intent(_project(found, (1, 2)), window, tenant),
        "timeseries": _series(_project(found, (0, 1)), window, None),
    }


def totals(*, tenant: Tenant | None, since: datetime) -> dict[str, Any]:
    """Decisions since ``since`` (read from the rollups and the tail): how many, how
    many were answered, and the success rate (None without decisions)."""
    found = tallies(tenant=tenant, window=window_of(since, None), by=("backend",))
    overall = found.get((None,), Tally())  # the decision-level rows: no backend
    return {
        "decisions": overall.count,
        "answered": overall.successes,
        "success_rate": _rate(overall.successes, overall.count),
    }

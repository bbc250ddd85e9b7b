"""Decision rollups: what the refresh writes, and the analytics reads on top of them."""

from __future__ import annotations

import csv
import io
from datetime import UTC, datetime, timedelta
from io import StringIO
from typing import Any

import pytest
from django.core.management import call_command
from django.utils import timezone
from rest_framework.test import APIClient

from analytics.classification_report import classification_summary
from analytics.models import LATENCY_BUCKETS_MS, DecisionRollup, RollupState
from analytics.reads import backends_by_intent, overview, quantile_ms, timeseries, window_of
from analytics.rollups import aggregate, bucket_floor, rollups_refresh
from analytics.tasks import rollup_decisions
from backends.models import Backend
from flywheel.errors import ValidationError
from flywheel.models import Tenant
from routing.models import PerformanceRecord, RoutingDecision

pytestmark = pytest.mark.django_db

NOW = bucket_floor(timezone.now(), "hour") + timedelta(minutes=30)
BASE = NOW - timedelta(hours=2, minutes=30)  # the start of an hour, two hours before NOW
M1, M2 = BASE + timedelta(minutes=1), BASE + timedelta(minutes=2)
CLOSE: dict[str, Any] = {"since": BASE, "until": BASE + timedelta(minutes=10)}  # minute buckets
WIDE: dict[str, Any] = {"since": NOW - timedelta(hours=20), "until": NOW}  # hour buckets


def decide(
    tenant: Tenant,
    *,
    at: datetime,
    outcome: str = "success",
    intent: str = "code-review",
    backend: Backend | None = None,
    score: float | None = None,
    total_ms: float = 100,
    attempts: tuple[tuple[Backend, bool, float], ...] = (),
) -> RoutingDecision:
    decision = RoutingDecision.objects.create(
        tenant=tenant,
        question="q",
        intent=intent,
        outcome=outcome,
        backend=backend,
        score=score,
        total_ms=total_ms,
    )
    RoutingDecision.objects.filter(pk=decision.pk).update(created_at=at)
    PerformanceRecord.objects.bulk_create(
        PerformanceRecord(backend=b, decision=decision, intent=intent, latency_ms=ms, success=ok)
        for b, ok, ms in attempts
    )
    return decision


@pytest.fixture
def other_backend(db) -> Backend:
    return Backend.objects.create(name="langflow-main", kind="langflow", base_url="http://h:7860")


@pytest.fixture
def other_tenant(db) -> Tenant:
    return Tenant.objects.create(name="Globex", slug="globex")


@pytest.fixture
def world(tenant: Tenant, other_tenant: Tenant, backend: Backend, other_backend: Backend) -> None:
    a, b = backend, other_backend
    decide(tenant, at=M1 + timedelta(seconds=10), backend=a, score=0.8, total_ms=120,
           attempts=((a, True, 80),))  # fmt: skip
    decide(tenant, at=M1 + timedelta(seconds=20), outcome="fallback", backend=b, score=0.6,
           total_ms=700, attempts=((a, False, 300), (b, True, 200)))  # fmt: skip
    decide(tenant, at=M2 + timedelta(seconds=5), outcome="cached", total_ms=5,
           attempts=((a, False, 40), (b, False, 60)))  # fmt: skip
    decide(tenant, at=M2 + timedelta(seconds=30), outcome="failed", intent="summarize",
           total_ms=1000, attempts=((a, False, 2000),))  # fmt: skip
    decide(other_tenant, at=M1, backend=a, score=0.1, attempts=((a, True, 90),))


def _rows(tenant: Tenant) -> set[tuple[Any, ...]]:
    return {
        (
            r.granularity,
            r.bucket_start,
            r.backend.name if r.backend else None,
            r.intent,
            r.count,
            r.successes,
            r.fallbacks,
            r.cached,
            r.won,
            r.scored,
        )
        for r in DecisionRollup.objects.filter(tenant=tenant).select_related("backend")
    }


def test_the_refresh_counts_decisions_and_attempts_per_bucket(world, tenant: Tenant) -> None:
    report = rollups_refresh(now=NOW)

    assert report["decisions"] == 5
    assert _rows(tenant) == {
        ("minute", M1, None, "code-review", 2, 2, 1, 0, 0, 0),
        ("minute", M1, "flowise-main", "code-review", 2, 1, 1, 0, 1, 1),
        ("minute", M1, "langflow-main", "code-review", 1, 1, 0, 0, 1, 1),
        ("minute", M2, None, "code-review", 1, 1, 0, 1, 0, 0),
        ("minute", M2, "flowise-main", "code-review", 1, 0, 1, 0, 0, 0),
        ("minute", M2, "langflow-main", "code-review", 1, 0, 1, 0, 0, 0),
        ("minute", M2, None, "summarize", 1, 0, 0, 0, 0, 0),
        ("minute", M2, "flowise-main", "summarize", 1, 0, 0, 0, 0, 0),
        ("hour", BASE, None, "code-review", 3, 3, 1, 1, 0, 0),
        ("hour", BASE, "flowise-main", "code-review", 3, 1, 2, 0, 1, 1),
        ("hour", BASE, "langflow-main", "code-review", 2, 1, 1, 0, 1, 1),
        ("hour", BASE, None, "summarize", 1, 0, 0, 0, 0, 0),
        ("hour", BASE, "flowise-main", "summarize", 1, 0, 0, 0, 0, 0),
    }
    hour = DecisionRollup.objects.get(granularity="hour", tenant=tenant, backend=None,
                                      intent="code-review")  # fmt: skip
    assert hour.latency_sum_ms == 825
    assert hour.latency_histogram == [1, 0, 1, 0, 1, 0, 0, 0, 0, 0]  # 5, 120, 700 ms
    assert RollupState.objects.get().last_decision_id == RoutingDecision.objects.latest("pk").pk


def test_refreshing_again_changes_nothing(world, tenant: Tenant) -> None:
    rollups_refresh(now=NOW)
    before = _rows(tenant)

    report = rollups_refresh(now=NOW)

    assert report["decisions"] == 0
    assert _rows(tenant) == before


def test_a_decision_written_late_is_counted_once_in_its_own_bucket(
    world, tenant: Tenant, backend: Backend
) -> None:
    rollups_refresh(now=NOW)
    decide(tenant, at=M1 + timedelta(seconds=40), backend=backend, attempts=((backend, True, 10),))

    rollups_refresh(now=NOW)
    rollups_refresh(now=NOW)

    totals = DecisionRollup.objects.filter(tenant=tenant, backend=None, intent="code-review")
    assert {(r.granularity, r.bucket_start): r.count for r in totals} == {
        ("minute", M1): 3,
        ("minute", M2): 1,
        ("hour", BASE): 4,
    }


def test_minute_rows_older_than_two_days_are_pruned(world, tenant: Tenant) -> None:
    rollups_refresh(now=NOW)

    rollups_refresh(now=NOW + timedelta(days=3))

    assert not DecisionRollup.objects.filter(granularity="minute").exists()
    assert DecisionRollup.objects.filter(granularity="hour", tenant=tenant).count() == 5


def test_backends_by_intent_reports_rates_latency_score_and_share(world, tenant: Tenant) -> None:
    rollups_refresh(now=NOW)

    found = backends_by_intent(tenant=tenant, **CLOSE)

    assert found["granularity"] == "minute"
    review, summarize = found["intents"]
    assert (review["intent"], review["decisions"], review["answered"], review["cached"]) == (
        "code-review",
        3,
        3,
        1,
    )
    flowise, langflow = review["backends"]
    assert flowise == {
        "backend": "flowise-main",
        "requests": 3,
        "success_rate": 0.3333,
        "fallback_rate": 0.6667,
        "p50_ms": 75.0,  # 40, 80, 300 ms: 1.5 of 3 is half-way into (50, 100]
        "p95_ms": flowise["p95_ms"],
        "mean_score": 0.8,
        "won": 1,
        "share": 0.3333,
        "avg_tokens": None,  # no attempt reported usage
        "avg_cost": None,
    }
    assert 250 <= flowise["p95_ms"] <= 500
    assert (langflow["backend"], langflow["requests"], langflow["mean_score"]) == (
        "langflow-main",
        2,
        0.6,
    )
    assert summarize["backends"][0]["p95_ms"] > 1000


@pytest.mark.parametrize("span", [CLOSE, WIDE], ids=["minutes", "hours"])
def test_the_reads_are_the_same_before_and_after_a_refresh(world, tenant: Tenant, span) -> None:
    tail_only = (backends_by_intent(tenant=tenant, **span), timeseries(tenant=tenant, **span))
    rollups_refresh(now=NOW)
    rolled = (backends_by_intent(tenant=tenant, **span), timeseries(tenant=tenant, **span))
    decide(tenant, at=M1, outcome="failed")  # rolled rows + a tail on top of them
    with_tail = backends_by_intent(tenant=tenant, **span)

    assert rolled == tail_only
    assert with_tail["intents"][0]["decisions"] == 4
    assert [b["requests"] for b in with_tail["intents"][0]["backends"]] == [3, 2]
    assert with_tail["intents"][0]["backends"][0]["share"] == 0.25  # 1 won of 4


@pytest.mark.parametrize("span", [CLOSE, WIDE], ids=["minutes", "hours"])
def test_decisions_per_method_come_from_the_rollups_and_the_tail(tenant: Tenant, span) -> None:
    for method, at in (("rules", M1), ("rules", M1), ("model", M2), ("default", M2)):
        RoutingDecision.objects.filter(pk=decide(tenant, at=at).pk).update(intent_method=method)
    tail_only = classification_summary(tenant=tenant, **span)["methods"]
    rollups_refresh(now=NOW)
    rolled = classification_summary(tenant=tenant, **span)["methods"]
    RoutingDecision.objects.filter(pk=decide(tenant, at=M1).pk).update(intent_method="model")

    with_tail = classification_summary(tenant=tenant, **span)["methods"]

    assert DecisionRollup.objects.filter(backend=None).exclude(methods={}).exists()
    assert rolled == tail_only
    assert rolled == [
        {"method": "rules", "decisions": 2, "share": 0.5},
        {"method": "default", "decisions": 1, "share": 0.25},
        {"method": "model", "decisions": 1, "share": 0.25},
    ]
    assert with_tail == [
        {"method": "model", "decisions": 2, "share": 0.4},
        {"method": "rules", "decisions": 2, "share": 0.4},
        {"method": "default", "decisions": 1, "share": 0.2},
    ]


def test_staff_reads_see_every_tenant(world) -> None:
    rollups_refresh(now=NOW)

    found = backends_by_intent(tenant=None, **CLOSE)

    assert found["intents"][0]["decisions"] == 4
    assert found["intents"][0]["backends"][0]["requests"] == 4


def test_the_timeseries_has_a_series_per_backend(world, tenant: Tenant) -> None:
    rollups_refresh(now=NOW)

    every = timeseries(tenant=tenant, **CLOSE)
    one = timeseries(tenant=tenant, intent="code-review", backend="LANGFLOW-main", **CLOSE)
    hours = timeseries(tenant=tenant, **WIDE)

    flowise = every["backends"][0]
    assert [(p["start"], p["requests"]) for p in flowise["buckets"]] == [(M1, 2), (M2, 2)]
    assert [s["backend"] for s in one["backends"]] == ["langflow-main"]
    assert [(p["start"], p["success_rate"]) for p in one["backends"][0]["buckets"]] == [
        (M1, 1.0),
        (M2, 0.0),
    ]
    assert [(p["start"], p["requests"]) for p in hours["backends"][0]["buckets"]] == [(BASE, 4)]


def test_p95_from_the_histogram_is_within_a_bucket_of_the_exact_value(
    tenant: Tenant, backend: Backend
) -> None:
    latencies = [7.0 * i**1.5 for i in range(1, 101)]  # 7 ms to 7 s, skewed slow
    decide(tenant, at=M1, backend=backend, attempts=tuple((backend, True, ms) for ms in latencies))
    rollups_refresh(now=NOW)

    p95 = backends_by_intent(tenant=tenant, **CLOSE)["intents"][0]["backends"][0]["p95_ms"]

    exact = sorted(latencies)[94]
    bounds = [0, *LATENCY_BUCKETS_MS]
    index = next(i for i, bound in enumerate(LATENCY_BUCKETS_MS) if exact <= bound)
    assert bounds[max(index - 1, 0)] <= p95 <= LATENCY_BUCKETS_MS[min(index + 1, 8)]


def test_the_overflow_bucket_reads_as_its_lower_bound() -> None:
    assert quantile_ms([0] * 9 + [3], 0.95) == 30000
    assert quantile_ms([2, 2, 0, 0, 0, 0, 0, 0, 0, 0], 0.5) == 50  # the first bucket's end
    assert quantile_ms([0] * 10, 0.5) is None


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"since": "yesterday"}, "since"),
        ({"until": "2025-13-01T00:00:00Z"}, "until"),
        ({"since": "2025-01-02T00:00:00Z", "until": "2025-01-01T00:00:00Z"}, "since"),
        ({"since": "2024-01-01T00:00:00Z", "until": "2024-06-01T00:00:00Z"}, "since"),
        ({"intent": "Not A Slug"}, "intent"),
    ],
)
def test_a_bad_range_or_intent_is_refused_by_name(tenant: Tenant, params, field: str) -> None:
    with pytest.raises(ValidationError) as refused:
        backends_by_intent(tenant=tenant, **params)

    assert list(refused.value.details["fields"]) == [field]


def test_the_api_shows_a_key_only_its_tenants_decisions(world, api_client: APIClient) -> None:
    rollups_refresh(now=NOW)
    params = {"since": CLOSE["since"].isoformat(), "until": CLOSE["until"].isoformat()}

    response = api_client.get("/api/v1/analytics/backends-by-intent", params)

    assert response.status_code == 200, response.content
    review = response.json()["intents"][0]
    assert review["decisions"] == 3
    assert review["backends"][0]["requests"] == 3  # the other tenant's attempt is not here


def test_the_api_answers_csv_one_row_per_backend_and_intent(world, api_client: APIClient) -> None:
    params = {"since": CLOSE["since"].isoformat(), "until": CLOSE["until"].isoformat()}

    by_intent = api_client.get("/api/v1/analytics/backends-by-intent", {**params, "format": "csv"})
    series = api_client.get("/api/v1/analytics/timeseries", {**params, "format": "csv"})

    assert by_intent["Content-Type"].startswith("text/csv")
    rows = list(csv.reader(io.StringIO(by_intent.content.decode())))
    assert rows[0][:3] == ["intent", "backend", "requests"]
    assert [row[:3] for row in rows[1:]] == [
        ["code-review", "flowise-main", "3"],
        ["code-review", "langflow-main", "2"],
        ["summarize", "flowise-main", "1"],
    ]
    rows = list(csv.reader(io.StringIO(series.content.decode())))
    assert rows[0] == ["backend", "start", "requests", "success_rate", "p95_ms"]
    assert [(row[0], row[2]) for row in rows[1:]] == [
        ("flowise-main", "2"),
        ("flowise-main", "2"),
        ("langflow-main", "1"),
        ("langflow-main", "1"),
    ]


@pytest.mark.parametrize(
    ("params", "field"),
    [({"since": "soon", "format": "csv"}, "since"), ({"format": "xml"}, "format")],
)
def test_the_api_refuses_bad_parameters_in_json(api_client: APIClient, params, field) -> None:
    response = api_client.get("/api/v1/analytics/timeseries", params)

    assert response.status_code == 400
    assert response["Content-Type"] == "application/json"
    assert list(response.json()["error"]["details"]["fields"]) == [field]


def test_the_task_and_the_command_refresh(world, tenant: Tenant) -> None:
    assert rollup_decisions()["decisions"] == 5
    out = StringIO()

    call_command("rollup_decisions", stdout=out)

    assert "Rolled up 0 new decision(s)" in out.getvalue()
    assert DecisionRollup.objects.filter(tenant=tenant, granularity="hour").count() == 5


@pytest.mark.parametrize(
    ("since", "until"),
    [
        (None, "0001-01-01T00:00:00Z"),
        ("0001-01-01T00:00:00Z", "0001-01-02T00:00:00Z"),
        (None, "9999-12-31T23:59:59Z"),
        ("9999-12-31T00:00:00Z", "9999-12-31T23:59:59Z"),
    ],
)
def test_dates_at_the_ends_of_the_calendar_read_an_empty_range(
    since: str | None, until: str
) -> None:
    # Valid ISO 8601 dates; the range arithmetic must not overflow datetime on them.
    window = window_of(since, until)

    assert window.start < window.end
    assert datetime(1970, 1, 1, tzinfo=UTC) <= window.start


def test_options_on_an_analytics_view_answers_json_even_when_csv_is_asked(
    api_client: APIClient,
) -> None:
    result = api_client.options("/api/v1/analytics/backends-by-intent?format=csv")

    assert result.status_code == 200
    assert result["Content-Type"].startswith("application/json")


@pytest.mark.parametrize("view", ["backends-by-intent", "timeseries"])
@pytest.mark.parametrize("value", ["", "xml", "CSV"])
def test_a_format_other_than_json_or_csv_is_a_400(
    api_client: APIClient, view: str, value: str
) -> None:
    # An empty ?format= was served as JSON, against the schema's enum (found by the fuzzer).
    result = api_client.get(f"/api/v1/analytics/{view}?format={value}")

    assert result.status_code == 400
    assert result.json()["error"]["details"] == {"fields": {"format": "Must be json or csv."}}


@pytest.mark.parametrize("span", [CLOSE, WIDE], ids=["minutes", "hours"])
def test_the_pages_single_read_matches_the_two_apis(world, tenant: Tenant, span) -> None:
    read = overview(tenant=tenant, **span)

    assert read["by_intent"] == backends_by_intent(tenant=tenant, **span)
    assert read["timeseries"] == timeseries(tenant=tenant, **span)
    assert read["by_intent"]["intents"]  # the world's decisions are in the range


def test_reported_token_usage_is_averaged_per_backend_before_and_after_the_refresh(
    tenant: Tenant, backend: Backend
) -> None:
    # Two attempts reported usage, one did not (an LLM-free flow): the mean is over two.
    for tokens, cost in ((100, None), (300, None), (None, None)):
        decision = decide(tenant, at=M1, backend=backend, attempts=())
        PerformanceRecord.objects.create(
            backend=backend,
            decision=decision,
            intent="code-review",
            latency_ms=10,
            success=True,
            total_tokens=tokens,
            cost=cost,
        )

    def stats() -> dict[str, Any]:
        found = backends_by_intent(tenant=tenant, **CLOSE)
        return found["intents"][0]["backends"][0]

    from_the_tail = stats()
    rollups_refresh(now=NOW)
    from_rollups = stats()

    assert from_the_tail["avg_tokens"] == from_rollups["avg_tokens"] == 200.0
    assert from_the_tail["avg_cost"] is from_rollups["avg_cost"] is None  # none reported one


def test_sums_of_four_byte_columns_are_added_in_eight(tenant: Tenant, backend: Backend) -> None:
    """Timings, latencies and scores are kept as real (4 bytes): added up as real,
    what is past 24 bits is lost (2**24 + 1 + 1 + 1 comes to 2**24 + 2 or + 4)."""
    for ms, score in ((2**24, 1.0), (1, 2**-24), (1, 2**-24), (1, 2**-24)):
        decide(
            tenant,
            at=M1,
            backend=backend,
            score=score,
            total_ms=ms,
            attempts=((backend, True, ms),),
        )

    tallies = aggregate(RoutingDecision.objects.all(), "minute")

    assert tallies[(M1, tenant.pk, None, "code-review")].latency_sum_ms == 2**24 + 3
    per_backend = tallies[(M1, tenant.pk, backend.pk, "code-review")]
    assert per_backend.latency_sum_ms == 2**24 + 3
    assert per_backend.score_sum == 1 + 3 * 2**-24

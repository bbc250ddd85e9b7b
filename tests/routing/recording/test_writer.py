"""Decisions written behind the answer: grouped writes, hurrying, the shared cache client."""

from __future__ import annotations

import asyncio
import math
import time
import uuid
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import pytest
from django.core.cache import caches
from django.db import transaction

from backends.models import Backend
from flywheel.cache import shared_cache
from flywheel.env import as_cache
from flywheel.models import Tenant
from routing.models import PerformanceRecord, RoutingDecision, Session, Turn
from routing.recording import answers, performance, store
from routing.recording import writer as recording
from routing.recording.answers import CachedAnswer, answer_recall
from routing.recording.compact import ATTEMPT
from routing.recording.decision import DecisionData
from routing.recording.own_writes import session_settled
from routing.recording.writer import drain, record_later
from routing.selection.attempt import Attempt
from tests.routing_world import World

pytestmark = pytest.mark.django_db(transaction=True)


def decision(tenant: Tenant, session_id: uuid.UUID | None = None, **fields: Any) -> DecisionData:
    given = {"question": "What is a flywheel?", "outcome": "success", "intent": "general"}
    return DecisionData(
        request_id=uuid.uuid4(), tenant_id=tenant.pk, session_id=session_id, **(given | fields)
    )


@pytest.fixture
def batches(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The size of every batch the writer threads write."""
    sizes: list[int] = []
    write = recording.decisions_record

    def counting(batch: Sequence[DecisionData], **kwargs: Any) -> Any:
        sizes.append(len(batch))
        return write(batch, **kwargs)

    monkeypatch.setattr(recording, "decisions_record", counting)
    return sizes


def test_decisions_arriving_together_are_written_in_one_batch(
    tenant: Tenant, batches: list[int]
) -> None:
    for _ in range(5):
        record_later(decision(tenant), performance_window=10)
    drain()

    assert batches == [5]
    assert RoutingDecision.objects.count() == 5


def test_a_conversation_does_not_wait_for_the_gathering(
    tenant: Tenant, batches: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(recording._Writer, "GATHER_SECONDS", 60.0)
    session = uuid.uuid4()
    record_later(
        decision(tenant, session, answer="A flywheel stores energy."), performance_window=10
    )

    async def settle() -> None:
        await asyncio.wait_for(session_settled(session), timeout=5)

    asyncio.run(settle())

    assert batches == [1]
    assert Turn.objects.get(session_id=session).answer == "A flywheel stores energy."


def test_the_answer_is_cached_by_the_writer(tenant: Tenant) -> None:
    entry = CachedAnswer(
        tenant_id=tenant.pk,
        intent="general",
        question="What  is a FLYWHEEL?",
        value={"answer": "A wheel.", "backend": "fw", "flow": "any"},
        ttl=60,
    )
    record_later(decision(tenant), performance_window=10, answer=entry)
    drain()

    assert answer_recall(tenant.pk, "general", "what is a flywheel?") == entry.value


def test_answers_written_together_are_each_cached_with_their_ttl(tenant: Tenant) -> None:
    entries = [
        CachedAnswer(tenant.pk, "general", f"question {i}", {"answer": f"a{i}"}, 60)
        for i in range(3)
    ] + [CachedAnswer(tenant.pk, "code-review", "question 0", {"answer": "review"}, 5)]
    recording.answers_remember(entries)

    for entry in entries:
        assert answer_recall(tenant.pk, entry.intent, entry.question) == entry.value
    cache: Any = shared_cache()  # scripts/test.sh sets a Redis CACHE_URL
    key = cache.make_key(answers._answer_key(tenant.pk, "code-review", "question 0"))
    assert 0 < cache._cache.get_client(key).ttl(key) <= 5


def test_a_failing_cache_loses_no_decision(tenant: Tenant, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(entries: list[CachedAnswer]) -> None:
        raise ConnectionError("cache down")

    monkeypatch.setattr(recording, "answers_remember", broken)
    entry = CachedAnswer(tenant.pk, "general", "q", {"answer": "a"}, 60)
    record_later(decision(tenant), performance_window=10, answer=entry)
    drain()

    assert RoutingDecision.objects.count() == 1


def test_a_redis_cache_url_uses_one_client_per_pool() -> None:
    config = as_cache("redis://127.0.0.1:6379/1")
    assert config["BACKEND"] == "flywheel.redis_cache.RedisCache"

    cache: Any = caches.create_connection("default")  # scripts/test.sh sets a Redis CACHE_URL
    assert type(cache).__module__ == "flywheel.redis_cache"
    client = cache._cache.get_client("k", write=True)
    assert cache._cache.get_client("other", write=True) is client
    shared_cache().set("flywheel:test:one-client", 1, 10)
    assert shared_cache().get("flywheel:test:one-client") == 1


def _stored(request_ids: list[uuid.UUID]) -> list[dict[str, Any]]:
    """Every row a batch wrote, per decision, without ids and timestamps."""
    stored = []
    for request_id in request_ids:
        row = RoutingDecision.objects.get(request_id=request_id)
        decision_fields = {
            f.attname: getattr(row, f.attname)
            for f in RoutingDecision._meta.concrete_fields
            if f.attname not in {"id", "created_at"}
        }
        records = list(
            row.attempts.order_by("id").values(
                "backend_id",
                "flow_id",
                "intent",
                "latency_ms",
                "success",
                "error_type",
                "prompt_tokens",
                "completion_tokens",
                "total_tokens",
                "cost",
            )
        )
        turns = list(
            Turn.objects.filter(decision=row)  # each turn linked to the decision it answered
            .order_by("id")
            .values("question", "answer", "intent", "backend_id", "flow_id")
        )
        stored.append({"decision": decision_fields, "records": records, "turns": turns})
    return stored


def test_postgresql_and_the_orm_store_the_same_rows(world: World) -> None:
    from routing.recording.batch_sql import decisions_insert

    tenant = Tenant.objects.get(slug="default")
    attempts = (
        Attempt(world.fw.pk, "fw", world.fw_flow.pk, "review", False, 12.5, "Timeout", "slow"),
        Attempt(
            world.lf.pk,
            "lf",
            world.lf_flow.pk,
            "review",
            True,
            30.25,
            prompt_tokens=12,
            completion_tokens=30,
            total_tokens=42,
        ),
    )

    def batch() -> list[DecisionData]:
        session = uuid.uuid4()
        return [
            decision(
                tenant,
                session,
                question=f"Question {i}",
                outcome="fallback",
                intent="code-review",
                intent_confidence=0.9,
                intent_method="rules",
                query_type="LOCAL",
                query_type_confidence=0.8,
                evidence={"intent": [r"\breview\b"], "query_type": {"reasoning": "who is"}},
                backend_id=world.lf.pk,
                flow_id=world.lf_flow.pk,
                score=0.77,
                candidates=[{"backend": "fw", "score": 0.8}, {"backend": "lf", "score": 0.77}],
                attempts=attempts,
                timings={"classify_ms": 0.2, "route_ms": 0.1, "execute_ms": 43, "total_ms": 44},
                answer=f"Answer {i}",
            )
            for i in range(3)
        ] + [
            decision(
                tenant,
                None,
                outcome="rejected",
                error_type="ValidationError",
                error_message="The query is not valid.",
            )
        ]

    by_sql, by_orm = batch(), batch()
    with transaction.atomic():
        decisions_insert(by_sql)
    with transaction.atomic():
        store._orm_insert(by_orm)

    def normalised(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        for row in rows:
            row["decision"].pop("request_id")
            row["decision"].pop("session_id")
        return rows

    sql_rows = _stored([d.request_id for d in by_sql])
    orm_rows = _stored([d.request_id for d in by_orm])
    assert sql_rows[0]["records"][0]["error_type"] == "Timeout"
    assert sql_rows[0]["records"][0]["total_tokens"] is None  # not reported: not zero
    assert sql_rows[0]["records"][1]["total_tokens"] == 42
    assert [len(r["turns"]) for r in sql_rows] == [1, 1, 1, 0]
    assert sql_rows[3]["decision"]["error_message"] == "The query is not valid."
    assert normalised(sql_rows) == normalised(orm_rows)
    session = Session.objects.get(decisions__request_id=by_sql[0].request_id)
    assert session.tenant_id == tenant.pk
    turns = list(session.turns.order_by("created_at", "id").values_list("question", flat=True))
    assert turns == ["Question 0", "Question 1", "Question 2"]


def test_a_backend_a_batch_refers_to_cannot_be_deleted_until_the_batch_commits(
    world: World,
) -> None:
    """The decision's references to backends and flows have no constraint in the
    database (routing.models, RECORD_REFERENCE); the batch locks what it refers to
    instead, as a constraint's check would, so a deletion waits for its commit and
    then clears or deletes its rows, never leaving them pointing at nothing."""
    import psycopg
    from django.db import connection

    from routing.recording.batch_sql import decisions_insert

    tenant = Tenant.objects.get(slug="default")
    attempt = Attempt(world.fw.pk, "fw", world.fw_flow.pk, "flow", ok=True, latency_ms=5.0)
    data = decision(
        tenant, backend_id=world.fw.pk, flow_id=world.fw_flow.pk, attempts=(attempt,), answer="a"
    )
    settings = connection.settings_dict
    other = psycopg.connect(
        host=settings["HOST"],
        port=settings["PORT"] or 5432,
        user=settings["USER"],
        password=settings["PASSWORD"],
        dbname=settings["NAME"],
        autocommit=True,
    )
    try:
        other.execute("SET lock_timeout = '200ms'")
        with transaction.atomic():
            decisions_insert([data])
            with pytest.raises(psycopg.errors.LockNotAvailable):
                other.execute("DELETE FROM chatflows_flow WHERE id = %s", [world.fw_flow.pk])
            with pytest.raises(psycopg.errors.LockNotAvailable):
                other.execute("DELETE FROM backends_backend WHERE id = %s", [world.fw.pk])
    finally:
        other.close()

    stored = RoutingDecision.objects.get(request_id=data.request_id)
    assert (stored.backend_id, stored.flow_id) == (world.fw.pk, world.fw_flow.pk)
    assert stored.attempts.get().backend_id == world.fw.pk


def test_a_batch_that_fails_half_way_writes_nothing(world: World) -> None:
    from django.db import IntegrityError

    from routing.recording.batch_sql import decisions_insert

    tenant = Tenant.objects.get(slug="default")
    good = decision(tenant, uuid.uuid4(), answer="fine")
    bad = replace(decision(tenant, uuid.uuid4(), answer="no such tenant"), tenant_id=10**9)

    with pytest.raises(IntegrityError), transaction.atomic():
        decisions_insert([good, bad])

    assert not RoutingDecision.objects.exists()
    assert not Session.objects.exists()
    assert not Turn.objects.exists()


def test_a_backend_deleted_while_its_query_ran_leaves_rows_as_its_delete_rules_say(
    world: World,
) -> None:
    """Its performance records cascade away; decisions and turns keep, without the link."""

    tenant = Tenant.objects.get(slug="default")
    attempts = (
        Attempt(world.lf.pk, "lf", world.lf_flow.pk, "echo", False, 5.0, "Timeout", "slow"),
        Attempt(world.fw.pk, "fw", world.fw_flow.pk, "review", True, 30.0),
    )

    def answered() -> DecisionData:
        return decision(
            tenant,
            uuid.uuid4(),
            outcome="fallback",
            backend_id=world.fw.pk,
            flow_id=world.fw_flow.pk,
            attempts=attempts,
            answer="from a backend deleted since",
        )

    by_sql, by_orm = answered(), answered()
    Backend.objects.filter(pk=world.fw.pk).delete()  # its flows go with it
    sql_rows, orm_rows = _stored_both_ways(by_sql, by_orm)
    for rows in (sql_rows, orm_rows):
        (row,) = rows
        assert (row["decision"]["backend_id"], row["decision"]["flow_id"]) == (None, None)
        assert [(r["backend_id"], r["success"]) for r in row["records"]] == [(world.lf.pk, False)]
        assert [(t["backend_id"], t["flow_id"]) for t in row["turns"]] == [(None, None)]
        row["decision"].pop("request_id")
        row["decision"].pop("session_id")
    assert sql_rows == orm_rows


def _stored_both_ways(
    by_sql: DecisionData, by_orm: DecisionData
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Write one decision with PostgreSQL's batch statement and one with the ORM writer;
    return the rows each left."""
    from routing.recording.batch_sql import decisions_insert

    with transaction.atomic():
        decisions_insert([by_sql])
    with transaction.atomic():
        store._orm_insert([by_orm])
    return _stored([by_sql.request_id]), _stored([by_orm.request_id])


def _unstorable(world: World, tenant: Tenant, session: uuid.UUID | None = None) -> DecisionData:
    """A decision whose backend said what PostgreSQL cannot store: NUL, a lone surrogate."""
    attempts = (
        Attempt(world.fw.pk, "fw", world.fw_flow.pk, "review", False, 5.0, "Odd", "said \x00"),
        Attempt(world.lf.pk, "lf", world.lf_flow.pk, "echo", True, 30.0),
    )
    return decision(
        tenant,
        session or uuid.uuid4(),
        outcome="fallback",
        evidence={"intent": ["x\ud800"], "k\x00": 1},
        backend_id=world.lf.pk,
        flow_id=world.lf_flow.pk,
        attempts=attempts,
        answer="a\x00b\udfffc \U0001f600",
    )


def test_text_postgresql_cannot_hold_is_stored_with_replacement_characters(
    world: World,
) -> None:

    tenant = Tenant.objects.get(slug="default")
    by_sql, by_orm = _unstorable(world, tenant), _unstorable(world, tenant)

    sql_rows, orm_rows = _stored_both_ways(by_sql, by_orm)
    for rows in (sql_rows, orm_rows):
        (row,) = rows
        assert row["decision"]["evidence"] == {"intent": ["x\ufffd"], "k\ufffd": 1}
        assert row["decision"]["fallback_chain"][0][ATTEMPT.index("error")] == "said \ufffd"
        assert [t["answer"] for t in row["turns"]] == ["a\ufffdb\ufffdc \U0001f600"]
        assert [r["success"] for r in row["records"]] == [False, True]
        row["decision"].pop("request_id")
        row["decision"].pop("session_id")
    assert sql_rows == orm_rows


def test_one_unstorable_answer_does_not_split_its_batch(world: World, batches: list[int]) -> None:
    tenant = Tenant.objects.get(slug="default")
    session = uuid.uuid4()  # one session: one writer thread, one batch

    record_later(_unstorable(world, tenant, session), performance_window=10)
    record_later(decision(tenant, session, answer="plain"), performance_window=10)
    drain()

    assert batches == [2]  # not retried one by one after a failed write
    assert RoutingDecision.objects.count() == 2
    assert Turn.objects.count() == 2


def test_beat_shares_performance_again_after_the_cache_lost_it(world: World) -> None:
    from routing.selection import state
    from routing.tasks import publish_performance

    tenant = Tenant.objects.get(slug="default")
    attempts = (Attempt(world.fw.pk, "fw", world.fw_flow.pk, "review", False, 40.0, "Timeout"),)
    recording.decisions_record([decision(tenant, attempts=attempts, intent="code-review")])
    shared_cache().clear()  # a Redis restart
    state.forget()
    assert state.published_evidence([world.fw.pk]) == {}

    assert publish_performance() == {"published": 1}  # one backend

    state.forget()
    evidence = state.published_evidence([world.fw.pk])[(world.fw.pk, "code-review")]
    seen = evidence[world.fw_flow.pk]
    assert (seen.answered, seen.failed) == (0.0, pytest.approx(1.0, rel=0.01))  # just now
    assert seen.failed_seconds / seen.failed == pytest.approx(0.040)


def test_a_cache_failure_after_the_commit_does_not_write_the_batch_again(
    world: World, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def unreachable(*args: object) -> None:
        raise ConnectionError("cache down")

    monkeypatch.setattr(store, "evidence_publish_soon", unreachable)
    tenant = Tenant.objects.get(slug="default")
    attempt = Attempt(world.fw.pk, "fw", world.fw_flow.pk, "review", True, 12.5)
    batch = [decision(tenant, uuid.uuid4(), answer="yes", attempts=(attempt,)) for _ in range(3)]
    for data in batch:
        record_later(data, performance_window=10)
    drain()

    assert RoutingDecision.objects.count() == 3
    assert "Could not record decision" not in caplog.text
    assert "could not be shared" in caplog.text


def test_beat_publishes_each_backend_once_however_many_records(
    world: World, django_assert_max_num_queries: Any
) -> None:
    from routing.models import PerformanceRecord
    from routing.selection import state
    from routing.tasks import publish_performance

    PerformanceRecord.objects.bulk_create(
        PerformanceRecord(
            backend=world.fw,
            flow=world.fw_flow,
            intent="code-review",
            latency_ms=10,
            success=True,
        )
        for _ in range(2_000)  # each its own created_at
    )
    state.policy_values()  # the policy is cached: the reads below are the records'

    # The backends, the enabled intents, then one read for every backend + intent.
    with django_assert_max_num_queries(3):
        assert publish_performance() == {"published": 1}

    state.forget()
    evidence = state.published_evidence([world.fw.pk])[(world.fw.pk, "code-review")]
    policy = state.policy_values()
    # The last N, each discounted by the newer ones (and by milliseconds of age).
    weights = sum(0.5 ** (k / policy.half_life_attempts) for k in range(policy.performance_window))
    assert evidence[world.fw_flow.pk].answered == pytest.approx(weights, rel=0.01)


def test_performance_memory_holds_the_mean_tokens_of_the_attempts_that_reported_them(
    world: World,
) -> None:
    from routing.selection import state
    from routing.selection.estimates import estimate

    tenant = Tenant.objects.get(slug="default")

    def attempt(tokens: int | None) -> Attempt:
        return Attempt(
            world.fw.pk, "fw", world.fw_flow.pk, "review", True, 10.0, total_tokens=tokens
        )

    batch = [
        decision(tenant, attempts=(attempt(tokens),), intent="code-review")
        for tokens in (100, None, 300)
    ]
    recording.decisions_record(batch)
    state.forget()

    evidence = state.published_evidence([world.fw.pk])[(world.fw.pk, "code-review")]
    seen = evidence[world.fw_flow.pk]
    half_life = state.policy_values().half_life_attempts
    first, second = 0.5 ** (2 / half_life), 0.5 ** (1 / half_life)  # two, one newer attempts
    assert seen.answered == pytest.approx(first + second + 1, rel=0.01)
    # The mean of 100 and 300, the older weighing a little less.
    mean = (100 * first + 300) / (first + 1)
    assert estimate(seen, state.policy_values().prior).tokens == pytest.approx(mean, rel=0.01)


def test_the_evidence_a_batch_touched_is_read_in_one_statement(
    world: World, django_assert_num_queries: Any
) -> None:
    from routing.models import PerformanceRecord

    for backend, flow, intent, ok, ms in [
        (world.fw, world.fw_flow, "code-review", True, 10.0),
        (world.fw, world.fw_flow, "code-review", False, 30.0),
        (world.lf, world.lf_flow, "code-review", True, 50.0),
        (world.fw, world.fw_flow, "summarize", True, 70.0),
    ]:
        PerformanceRecord.objects.create(
            backend=backend, flow=flow, intent=intent, latency_ms=ms, success=ok
        )
    recording.policy_values()  # the policy is cached: the reads below are the records'

    with django_assert_num_queries(2):  # the enabled intents, then every backend + intent
        together = performance.evidence_of([world.fw.pk, world.lf.pk], 10)

    measured = {
        (backend_id, intent, flow_id): (
            round(e.answered),
            round(e.failed),
            round(math.exp(e.log_seconds / e.answered) * 1000),  # typical ms of the answers
            round(e.failed_seconds / e.failed * 1000) if e.failed else None,
        )
        for backend_id, by_intent in together.items()
        for intent, flows in by_intent.items()
        for flow_id, e in flows.items()
    }
    assert measured == {
        (world.fw.pk, "code-review", world.fw_flow.pk): (1, 1, 10, 30),
        (world.lf.pk, "code-review", world.lf_flow.pk): (1, 0, 50, None),
        (world.fw.pk, "summarize", world.fw_flow.pk): (1, 0, 70, None),
    }


def test_a_record_keeps_when_its_attempt_ended_not_when_it_was_written(world: World) -> None:
    """Written 40 s late (a stalled writer, or a database whose clock runs ahead), a
    record still says when its attempt ended: what this process saw itself and what the
    evidence folded from the records hold line up (routing.selection.learning.Book)."""
    tenant = Tenant.objects.get(slug="default")
    ended = time.time() - 40
    attempt = Attempt(world.fw.pk, "fw", world.fw_flow.pk, "review", True, 5.0, ended_at=ended)
    unknown = Attempt(world.lf.pk, "lf", world.lf_flow.pk, "echo", False, 5.0, "Timeout")
    attempts = (unknown, attempt)  # an attempt of an older spool has no end time
    by_sql, by_orm = decision(tenant, attempts=attempts), decision(tenant, attempts=attempts)

    _stored_both_ways(by_sql, by_orm)

    for written in (by_sql, by_orm):
        times = dict(
            PerformanceRecord.objects.filter(decision__request_id=written.request_id).values_list(
                "backend__name", "created_at"
            )
        )
        assert times["fw"].timestamp() == pytest.approx(ended, abs=0.001)
        assert times["lf"].timestamp() == pytest.approx(time.time(), abs=5)  # when written


def test_both_writers_keep_the_json_columns_as_compact_text(world: World) -> None:
    from django.db import connection

    tenant = Tenant.objects.get(slug="default")
    columns: dict[str, Any] = {
        "evidence": {"intent": [7, "follow-up of: why?"], "intent_summary": "matched 'why'"},
        "candidates": [[world.lf.pk, world.lf_flow.pk, 0.585, 0.8, 0.4619, 1000.0, 0, 2.5, True]],
    }
    attempt = Attempt(world.lf.pk, "lf", world.lf_flow.pk, "review", True, 15.5)
    by_sql, by_orm = (decision(tenant, attempts=(attempt,), **columns) for _ in range(2))
    _stored_both_ways(by_sql, by_orm)

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT evidence::text, candidates::text, fallback_chain::text "
            "FROM analytics_routingdecision WHERE request_id IN (%s, %s) ORDER BY id",
            [by_sql.request_id, by_orm.request_id],
        )
        stored = cursor.fetchall()
    # As the json type keeps them: no space after a comma or colon, as jsonb wrote them.
    expected = (
        '{"intent":[7,"follow-up of: why?"],"intent_summary":"matched \'why\'"}',
        f"[[{world.lf.pk},{world.lf_flow.pk},0.585,0.8,0.4619,1000.0,0,2.5,true]]",
        f"[[{world.lf.pk},{world.lf_flow.pk},true,15.5]]",
    )
    assert stored == [expected, expected]
    assert RoutingDecision.objects.get(request_id=by_sql.request_id).candidates == [
        [world.lf.pk, world.lf_flow.pk, 0.585, 0.8, 0.4619, 1000.0, 0, 2.5, True]
    ]


def test_both_writers_keep_timings_scores_and_latencies_in_four_bytes(world: World) -> None:
    from django.db import connection

    tenant = Tenant.objects.get(slug="default")
    attempt = Attempt(world.lf.pk, "lf", world.lf_flow.pk, "review", True, 412.37)
    numbers: dict[str, Any] = {
        "intent_confidence": 0.8473,
        "score": 0.585,
        "timings": {
            "classify_ms": 0.213,
            "route_ms": 0.1,
            "execute_ms": 412.5,
            "total_ms": 1234.567,
        },
    }
    by_sql, by_orm = (decision(tenant, attempts=(attempt,), **numbers) for _ in range(2))
    _stored_both_ways(by_sql, by_orm)

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_column_size(d.total_ms), pg_column_size(d.score), "
            "pg_column_size(p.latency_ms) FROM analytics_routingdecision d "
            "JOIN analytics_performancerecord p ON p.decision_id = d.id"
        )
        assert cursor.fetchall() == [(4, 4, 4), (4, 4, 4)]
    for request_id in (by_sql.request_id, by_orm.request_id):
        kept = RoutingDecision.objects.get(request_id=request_id)
        # Read back as written: PostgreSQL writes a real as its shortest exact text.
        assert (kept.intent_confidence, kept.score) == (0.8473, 0.585)
        assert (kept.classify_ms, kept.route_ms, kept.total_ms) == (0.213, 0.1, 1234.567)
        assert kept.attempts.get().latency_ms == 412.37


def test_numbers_past_what_four_bytes_hold_are_kept_at_their_bounds(world: World) -> None:
    """PostgreSQL refuses a real under 1.4e-45 or over 3.4e38 ("out of range"): the
    batch would fail with it. Such a number is kept as 0, or the largest real."""
    tenant = Tenant.objects.get(slug="default")
    attempt = Attempt(world.lf.pk, "lf", world.lf_flow.pk, "review", True, 1e-50)
    numbers: dict[str, Any] = {
        "intent_confidence": 1e-50,
        "score": -1e-300,
        "timings": {"classify_ms": 1e-46, "route_ms": 0.1, "execute_ms": 5e-39, "total_ms": 1e39},
    }
    by_sql, by_orm = (decision(tenant, attempts=(attempt,), **numbers) for _ in range(2))

    _stored_both_ways(by_sql, by_orm)

    for request_id in (by_sql.request_id, by_orm.request_id):
        kept = RoutingDecision.objects.get(request_id=request_id)
        assert (kept.intent_confidence, kept.score, kept.classify_ms) == (0, 0, 0)
        assert (kept.execute_ms, kept.route_ms) == (0, 0.1)
        assert kept.total_ms == pytest.approx(3.4028235e38)
        assert kept.attempts.get().latency_ms == 0

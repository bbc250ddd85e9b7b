"""What routing learned is a function of the stored performance records: folded from
them after every batch, and rebuilt from them after a restart."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
from django.utils import timezone

from chatflows.models import Flow
from flywheel.cache import shared_cache
from flywheel.models import Tenant
from routing.models import PerformanceRecord
from routing.recording import store
from routing.recording.decision import DecisionData
from routing.recording.performance import evidence_of
from routing.selection import state
from routing.selection.attempt import Attempt
from routing.selection.estimates import folded
from routing.selection.learning import book
from routing.selection.scoring import PolicyValues
from routing.tasks import publish_performance
from tests.routing_world import World

pytestmark = pytest.mark.django_db(transaction=True)


def _records(world: World, outcomes: list[tuple[bool, float]]) -> None:
    """Performance records one second apart, the newest now."""
    now = timezone.now()
    PerformanceRecord.objects.bulk_create(
        PerformanceRecord(
            backend=world.fw,
            flow=world.fw_flow,
            intent="code-review",
            success=ok,
            latency_ms=ms,
            error_type="" if ok else "UnexpectedError",
        )
        for ok, ms in outcomes
    )
    ids = list(PerformanceRecord.objects.order_by("id").values_list("id", flat=True))
    for age, pk in enumerate(reversed(ids)):
        PerformanceRecord.objects.filter(pk=pk).update(created_at=now - timedelta(seconds=age))


def test_evidence_is_folded_from_the_records_as_the_book_folds_attempts(world: World) -> None:
    outcomes = [(True, 120.0)] * 30 + [(False, 40.0)] * 4 + [(True, 900.0)] * 6
    _records(world, outcomes)
    policy = PolicyValues()
    found = evidence_of([world.fw.pk], policy.performance_window)[world.fw.pk]
    stored = found["code-review"][world.fw_flow.pk]

    rows = PerformanceRecord.objects.order_by("created_at").values_list(
        "created_at", "success", "latency_ms"
    )
    expected = folded(
        [(at.timestamp(), ok, ms / 1000, None) for at, ok, ms in rows],
        stored.at,
        policy.half_life_seconds,
        policy.half_life_attempts,
    )
    assert stored.long == expected.long
    assert stored.changes == expected.changes >= 1  # the failures, then the slow answers
    assert found.get("general", {}) == {}  # an intent with no attempts has no evidence


def test_after_a_restart_routing_rebuilds_what_it_learned_from_the_records(
    world: World,
) -> None:
    _records(world, [(True, 100.0)] * 40)
    shared_cache().clear()  # Redis restarted empty
    state.forget()
    book.forget()  # a new process
    fresh = state.routing_state()
    backends = [b for b in fresh.backends if b.id == world.fw.pk]
    before = fresh.beliefs(backends).of(world.fw.pk, world.fw_flow.pk, "code-review")
    assert before.attempts == 0  # nothing known: the prior

    assert publish_performance() == {"published": 1}  # beat, or the first batch written
    state.forget()
    known = state.routing_state().beliefs(backends)
    after = known.of(world.fw.pk, world.fw_flow.pk, "code-review")
    assert after.attempts > 20
    assert after.success > 0.9
    assert 0.08 < after.typical_seconds < 0.12


def test_each_batch_written_shares_the_evidence_of_the_backends_it_tried(world: World) -> None:
    tenant = Tenant.objects.get(slug="default")
    attempts = tuple(
        Attempt(world.fw.pk, "fw", world.fw_flow.pk, "reviewer", True, 200.0) for _ in range(3)
    )
    data = DecisionData(
        uuid.uuid4(), tenant.pk, "Review this", "success", intent="code-review", attempts=attempts
    )
    store.decisions_record([data])
    state.forget()
    published = state.published_evidence([world.fw.pk])
    evidence = published[(world.fw.pk, "code-review")][world.fw_flow.pk]
    assert evidence.answered == pytest.approx(3, rel=0.1)


def test_records_from_before_a_change_on_another_intent_count_a_tenth(world: World) -> None:
    """lf's general flow failed; then lf changed (its code reviews turned slow) and its
    general flow answered once: the failures from before that change count a tenth, in
    the stored evidence as in a process's own (Evidence.then's moved_at)."""
    now = timezone.now()
    rows: list[tuple[Flow, str, bool, float, float]] = [  # flow, intent, ok, ms, age
        *((world.generic, "general", False, 50.0, 60.0 - i) for i in range(10)),
        *((world.lf_flow, "code-review", True, 100.0, 40.0 - i * 0.1) for i in range(100)),
        *((world.lf_flow, "code-review", True, 3000.0, 25.0 - i) for i in range(3)),
        (world.generic, "general", True, 100.0, 1.0),
    ]
    PerformanceRecord.objects.bulk_create(
        PerformanceRecord(backend=world.lf, flow=flow, intent=intent, success=ok, latency_ms=ms)
        for flow, intent, ok, ms, _ in rows
    )
    for record, (*_, age) in zip(PerformanceRecord.objects.order_by("id"), rows, strict=True):
        PerformanceRecord.objects.filter(pk=record.pk).update(
            created_at=now - timedelta(seconds=age)
        )
    policy = PolicyValues()
    found = evidence_of([world.lf.pk], policy.performance_window)[world.lf.pk]
    code = found["code-review"][world.lf_flow.pk]
    assert code.changed_at > (now - timedelta(seconds=40)).timestamp()  # the slow answers

    general = found["general"][world.generic.pk]
    attempts = [
        ((now - timedelta(seconds=age)).timestamp(), ok, ms / 1000, None)
        for flow, _, ok, ms, age in rows
        if flow is world.generic
    ]
    half_lives = general.at, policy.half_life_seconds, policy.half_life_attempts
    moved = folded(attempts, *half_lives, moved_at=code.changed_at)
    kept = folded(attempts, *half_lives)
    assert general.long == moved.long
    assert general.failed == pytest.approx(kept.failed * 0.1)

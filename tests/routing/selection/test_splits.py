"""A/B splits: an intent's questions go first to an arm, in proportion to the arms' weights.

The draw and the arms' order are pure (routing.selection.splits); the rest goes
through answer_question in the test world: the arm that was drawn is recorded,
an arm that cannot answer gives its share to the others, and dry runs show
routing's own order.
"""

from __future__ import annotations

import random
from collections import Counter
from typing import Any

import pytest
from asgiref.sync import async_to_sync

from flywheel.models import Tenant
from routing.answering.query_input import query_request
from routing.answering.service import answer_question, route_question
from routing.models import Intent, RoutingDecision, Split, SplitArm
from routing.recording.writer import drain
from routing.selection import planning
from routing.selection.estimates import Prior, estimate
from routing.selection.scoring import Arm, BackendEntry, Candidate, FlowEntry
from routing.selection.splits import drawn_arm, split_first
from routing.selection.state import policy_values
from tests.routing_world import World, refresh

REVIEW = "Please review my pull request"
# The service's database work runs in other threads: committed, not in a test transaction.
service = pytest.mark.django_db(transaction=True)


# --- the draw ------------------------------------------------------------------------


def test_arms_are_drawn_in_proportion_to_their_weights() -> None:
    arms = [Arm("A", 1, None, 80), Arm("B", 2, None, 15), Arm("C", 3, None, 5)]
    rng = random.Random(7)  # noqa: S311 - a test's draws

    drawn = Counter(drawn_arm(arms, rng).label for _ in range(20_000))

    shares = {label: n / 20_000 for label, n in drawn.items()}
    assert shares["A"] == pytest.approx(0.80, abs=0.015)
    assert shares["B"] == pytest.approx(0.15, abs=0.015)
    assert shares["C"] == pytest.approx(0.05, abs=0.01)


def _candidate(backend_id: int, name: str, *, trial: bool = False) -> Candidate:
    flow = FlowEntry(backend_id * 10, backend_id, name, name, frozenset({"code-review"}), 1)
    backend = BackendEntry(backend_id, name, "flowise", flows=(flow,))
    return Candidate(
        backend=backend, flow=flow, match=0.55, health=1.0, performance=0.5, score=0.5,
        estimate=estimate(None, Prior()), expected_seconds=1.0, trial=trial,
    )  # fmt: skip


def test_the_drawn_arm_goes_first_and_routing_order_follows_without_it() -> None:
    fw, lf, third = _candidate(1, "fw"), _candidate(2, "lf"), _candidate(3, "third")
    arms = [Arm("B", 2, None, 1)]

    order = split_first([fw, lf, third], arms, lambda arm: lf, random.Random(1))  # noqa: S311

    assert [(c.backend.name, c.arm) for c in order] == [("lf", "B"), ("fw", ""), ("third", "")]


def test_an_arm_that_cannot_answer_gives_its_share_to_the_others() -> None:
    fw, lf = _candidate(1, "fw"), _candidate(2, "lf")
    arms = [Arm("A", 1, None, 99), Arm("B", 2, None, 1)]
    down = {1}  # A's backend is down: B gets every question
    rng = random.Random(3)  # noqa: S311

    def candidate_of(arm: Arm) -> Candidate | None:
        return None if arm.backend_id in down else {1: fw, 2: lf}[arm.backend_id]

    firsts = {split_first([lf], arms, candidate_of, rng)[0].arm for _ in range(50)}
    assert firsts == {"B"}
    down.add(2)  # no arm can answer: routing's own order
    assert split_first([fw, lf], arms, candidate_of, rng) == [fw, lf]


def test_a_breakers_trial_still_goes_first() -> None:
    trial, lf = _candidate(1, "fw", trial=True), _candidate(2, "lf")

    order = split_first([trial, lf], [Arm("B", 2, None, 1)], lambda arm: lf, random.Random(1))  # noqa: S311

    assert [c.backend.name for c in order] == ["fw", "lf"]


# --- through the service ---------------------------------------------------------------


@pytest.fixture(autouse=True)
def _reproducible_draws(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(planning, "_draws", random.Random(2026))  # noqa: S311 - a test's draws


def ask(tenant: Tenant, **fields: Any) -> dict[str, Any]:
    try:
        return async_to_sync(answer_question)(query_request(fields), tenant=tenant)
    finally:
        drain()


def split(world: World, *arms: tuple[str, str, int], flow: bool = False) -> Split:
    """A split of code review over ``arms`` (label, backend name, weight)."""
    found = Split.objects.create(intent=Intent.objects.get(slug="code-review"))
    backends = {"fw": world.fw, "lf": world.lf}
    flows = {"fw": world.fw_flow, "lf": world.lf_flow}
    for label, name, weight in arms:
        SplitArm.objects.create(
            split=found,
            label=label,
            backend=backends[name],
            flow=flows[name] if flow else None,
            weight=weight,
        )
    refresh()
    return found


@service
def test_a_split_sends_the_intents_questions_to_its_arm_and_records_it(
    world: World, tenant: Tenant
) -> None:
    assert ask(tenant, question=REVIEW)["routing"]["backend"] == "fw"  # routing's own choice
    split(world, ("B", "lf", 1), flow=True)

    body = ask(tenant, question=REVIEW)

    routing = body["routing"]
    assert (routing["backend"], routing["arm"]) == ("lf", "B")
    assert routing["candidates"][0]["arm"] == "B"
    assert [(c["backend"], c["flow"]) for c in routing["candidates"]] == [
        ("lf", "echo"),
        ("fw", "reviewer"),  # routing's own order is the fallback
        ("lf", "anything"),
    ]
    assert "Tried first as arm B of the A/B split of code-review questions" in routing["why"]
    decision = RoutingDecision.objects.latest("created_at")
    assert decision.evidence["arm"] == "B"
    assert decision.backend == world.lf


@service
def test_both_arms_of_a_split_get_questions(world: World, tenant: Tenant) -> None:
    split(world, ("A", "fw", 1), ("B", "lf", 1))

    arms = Counter(ask(tenant, question=REVIEW)["routing"]["arm"] for _ in range(30))

    assert set(arms) == {"A", "B"}  # the proportions are the draw's test, above
    by_arm = dict(RoutingDecision.objects.values_list("evidence__arm", "backend__name"))
    assert by_arm == {"A": "fw", "B": "lf"}


@service
def test_a_disabled_split_or_another_intent_is_routed_as_usual(
    world: World, tenant: Tenant
) -> None:
    made = split(world, ("B", "lf", 1))

    other = ask(tenant, question=REVIEW, intent="technical-analysis")
    made.enabled = False
    made.save()
    refresh()
    off = ask(tenant, question=REVIEW)

    assert "arm" not in other["routing"]
    assert "arm" not in off["routing"]
    assert not [e for e in RoutingDecision.objects.values_list("evidence", flat=True) if "arm" in e]


@service
def test_an_arm_in_cooldown_leaves_the_question_to_routing(world: World, tenant: Tenant) -> None:
    split(world, ("B", "lf", 1))
    world.set_health(world.lf, healthy=True, cooldown=True)

    body = ask(tenant, question=REVIEW)

    assert body["routing"]["backend"] == "fw"
    assert "arm" not in body["routing"]


@service
def test_a_dry_run_shows_routings_own_order(world: World, tenant: Tenant) -> None:
    split(world, ("B", "lf", 1))

    plan = async_to_sync(route_question)(query_request({"question": REVIEW}), tenant=tenant)

    assert plan["candidates"][0]["backend"] == "fw"
    assert "arm" not in plan["candidates"][0]


@service
def test_an_arm_whose_flow_does_not_serve_the_intent_cannot_answer(
    world: World, tenant: Tenant
) -> None:
    world.lf_flow.intent_keywords = ["creative"]
    world.lf_flow.save()
    split(world, ("B", "lf", 1), flow=True)

    body = ask(tenant, question=REVIEW)

    assert (body["routing"]["backend"], body["routing"].get("arm")) == ("fw", None)


@service
def test_the_policy_read_holds_the_enabled_splits_and_their_arms(world: World) -> None:
    split(world, ("A", "fw", 3), ("B", "lf", 1))

    arms = policy_values().arms("code-review")

    assert [(a.label, a.backend_id, a.weight) for a in arms] == [
        ("A", world.fw.pk, 3),
        ("B", world.lf.pk, 1),
    ]
    assert policy_values().arms("general") == ()

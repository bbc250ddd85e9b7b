"""Exploration keeps every healthy backend measured, so a healed one comes back.

With the policy's ``exploration`` (0.5 by default; 0 in the test world), a real
question's first candidate is drawn from what routing believes of each (Thompson
sampling): a backend demoted by its failures keeps being tried now and then while
routing is unsure of it, more so as its failures fade. A dry run shows routing's
preference as it stands.
"""

from __future__ import annotations

import random
from datetime import timedelta
from typing import Any

import httpx
import pytest
from asgiref.sync import async_to_sync
from django.utils import timezone

from backends.models import Backend, BackendHealth
from chatflows.models import Flow
from flywheel.models import Tenant
from routing.answering.query_input import query_request
from routing.answering.service import answer_question, route_question
from routing.models import PerformanceRecord, RoutingDecision
from routing.recording.compact import read
from routing.recording.performance import evidence_publish
from routing.recording.writer import drain
from routing.selection import learning, planning
from routing.selection.state import policy_values, routing_policy_get
from tests.captured import response
from tests.routing_world import World, refresh

pytestmark = pytest.mark.django_db(transaction=True)

REVIEW = "Please review my pull request"


@pytest.fixture(autouse=True)
def _reproducible_draws(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(planning, "_draws", random.Random(2026))  # noqa: S311 - a test's draws


def ask(tenant: Tenant) -> dict[str, Any]:
    try:
        return async_to_sync(answer_question)(query_request({"question": REVIEW}), tenant=tenant)
    finally:
        drain()


def standing(tenant: Tenant) -> dict[str, dict[str, Any]]:
    """Each backend's candidate in a dry run, by name."""
    planned = async_to_sync(route_question)(query_request({"question": REVIEW}), tenant=tenant)
    return {c["backend"]: c for c in planned["candidates"]}


def exploring(on: bool) -> None:
    policy = routing_policy_get()
    policy.exploration = 0.5 if on else 0.0
    policy.save()
    refresh()


def demoted_then_healed(world: World, tenant: Tenant) -> None:
    """fw fails (lf answers and is measured well), heals, and two minutes pass: four
    half-lives, so its failures count for a sixteenth of what they did."""
    world.fail(world.fw_route)
    for _ in range(3):
        assert ask(tenant)["routing"]["backend"] == "lf"
    assert world.fw_route.call_count == 1  # demoted at its first failure
    world.fw_route.mock(return_value=response("flowise", "prediction_agentflow"))
    PerformanceRecord.objects.filter(backend=world.fw).update(
        created_at=timezone.now() - timedelta(minutes=2)
    )
    learning.book.forget()  # this process's own attempts: as old as the records now
    evidence_publish([world.fw.pk, world.lf.pk], policy_values().performance_window)


def test_a_healed_backend_demoted_by_its_failures_wins_its_traffic_back(
    world: World, tenant: Tenant
) -> None:
    demoted_then_healed(world, tenant)
    exploring(True)
    before = standing(tenant)["fw"]

    served = [ask(tenant)["routing"]["backend"] for _ in range(30)]

    back = served.index("fw")  # tried once more (it was failing), or drawn: unsure of it
    assert back < 20
    assert served[:back] == ["lf"] * back
    kept = [read(d).evidence for d in RoutingDecision.objects.all()]
    assert any("fw" in (e.get("explored"), e.get("retried")) for e in kept)
    after = standing(tenant)["fw"]  # measured healthy again: believed to answer
    assert after["success"] > before["success"]
    assert after["attempts"] > before["attempts"]


def test_no_exploration_with_explore_off(world: World, tenant: Tenant) -> None:
    exploring(False)
    demoted_then_healed(world, tenant)

    served = [ask(tenant)["routing"]["backend"] for _ in range(30)]

    # The best estimate, always: fw is neither drawn nor retried. (Its flow's breaker,
    # opened by the failures, may still spend its one trial on it once the cooldown
    # has passed, as on a slow machine; answered, fw may then rank first on its own
    # estimate. That is the breaker, not exploration.)
    assert served[0] == "lf"
    kept = RoutingDecision.objects.values_list("evidence", flat=True)
    assert not [e for e in kept if "explored" in e or "retried" in e]


def test_a_dry_run_shows_routing_preference_without_exploring(world: World, tenant: Tenant) -> None:
    demoted_then_healed(world, tenant)
    exploring(True)

    for _ in range(20):
        planned = async_to_sync(route_question)(query_request({"question": REVIEW}), tenant=tenant)
        assert [(c["backend"], c["flow"]) for c in planned["candidates"]] == [
            ("lf", "echo"),
            ("fw", "reviewer"),
            ("lf", "anything"),
        ]

    served = [ask(tenant)["routing"]["backend"] for _ in range(20)]
    assert "fw" in served  # a real question explores


def test_a_flow_on_several_backends_runs_on_one_and_falls_back_to_the_others(
    world: World, tenant: Tenant
) -> None:
    """The same flow on two backends (one server registered twice, or a replica): asked
    by its id it runs on one, and if that fails, on the other. It was refused: "Flow id
    ... is on several backends"."""
    twin = Backend.objects.create(name="fw-twin", kind="flowise", base_url="http://fw2.test")
    BackendHealth.objects.create(backend=twin, healthy=True)
    Flow.objects.create(
        backend=twin,
        external_id=world.fw_flow.external_id,
        name="reviewer",
        deployed=True,
        intent_keywords=world.fw_flow.intent_keywords,
    )
    twin_route = world.router.post(url__regex=r"http://fw2\.test/api/v1/prediction/.*").mock(
        return_value=response("flowise", "prediction_agentflow")
    )
    refresh()
    asked = query_request({"question": REVIEW, "flow": world.fw_flow.external_id})

    answered = async_to_sync(answer_question)(asked, tenant=tenant)
    first = answered["routing"]["backend"]
    world.fail(world.fw_route)
    twin_route.mock(return_value=httpx.Response(500, json={"message": "boom"}))
    failing = world.fw_route if first == "fw" else twin_route
    other = twin_route if first == "fw" else world.fw_route
    other.mock(return_value=response("flowise", "prediction_agentflow"))
    fallen = async_to_sync(answer_question)(asked, tenant=tenant)
    drain()

    assert first in {"fw", "fw-twin"}
    assert answered["routing"]["routing_method"] == "explicit"
    assert failing.calls.call_count >= 2
    chain = [a["backend"] for a in fallen["routing"]["fallback_chain"]]
    assert chain == [first, "fw-twin" if first == "fw" else "fw"]
    assert fallen["routing"]["flow"] == "reviewer"

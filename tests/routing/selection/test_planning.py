"""A share of questions keeps every healthy backend measured, so a healed one comes back."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.utils import timezone

from flywheel.models import Tenant
from routing.answering.query_input import query_request
from routing.answering.service import answer_question, route_question
from routing.models import PerformanceRecord, RoutingDecision, RoutingPolicy
from routing.recording.performance import performance_of
from routing.recording.writer import drain
from routing.selection.state import publish_performance, routing_policy_get
from tests.captured import response
from tests.routing_world import World, refresh

pytestmark = pytest.mark.django_db(transaction=True)

REVIEW = "Please review my pull request"


def ask(tenant: Tenant) -> dict[str, Any]:
    try:
        return async_to_sync(answer_question)(query_request({"question": REVIEW}), tenant=tenant)
    finally:
        drain()


def demoted_then_healed(world: World, tenant: Tenant) -> None:
    """fw fails (lf answers and is measured well), heals, and a minute passes: its
    failures are older than routing's performance memory keeps."""
    world.fail(world.fw_route)
    for _ in range(3):
        assert ask(tenant)["routing"]["backend"] == "lf"
    world.fw_route.mock(return_value=response("flowise", "prediction_agentflow"))
    PerformanceRecord.objects.filter(backend=world.fw).update(
        created_at=timezone.now() - timedelta(minutes=2)
    )
    publish_performance(world.fw.pk, "code-review", performance_of(world.fw.pk, "code-review", 10))


def test_a_healed_backend_demoted_by_its_failures_wins_its_traffic_back(
    world: World, tenant: Tenant
) -> None:
    demoted_then_healed(world, tenant)

    served = [ask(tenant)["routing"]["backend"] for _ in range(30)]

    back = served.index("fw")  # one question in twenty (exploration_share 0.05) measures it
    assert back < 20
    assert served[:back] == ["lf"] * back
    assert served[back:] == ["fw"] * (30 - back)  # measured healthy and fast: first again
    explored = RoutingDecision.objects.filter(evidence__explored="fw")
    assert explored.count() == 1


def test_no_exploration_with_a_share_of_zero(world: World, tenant: Tenant) -> None:
    policy = routing_policy_get()
    policy.exploration_share = 0
    policy.save()
    refresh()
    demoted_then_healed(world, tenant)

    served = [ask(tenant)["routing"]["backend"] for _ in range(30)]

    assert set(served) == {"lf"}


def test_a_dry_run_shows_routing_preference_without_exploring(world: World, tenant: Tenant) -> None:
    demoted_then_healed(world, tenant)
    RoutingPolicy.objects.update(exploration_share=1.0)
    policy = routing_policy_get()
    policy.save()
    refresh()

    planned = async_to_sync(route_question)(query_request({"question": REVIEW}), tenant=tenant)

    assert [c["backend"] for c in planned["candidates"]] == ["lf", "fw"]
    assert ask(tenant)["routing"]["backend"] == "fw"  # a real question explores at once

"""The traffic breaker: failing answers open a cooldown; one trial query closes it."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.utils import timezone

from backends.models import BackendHealth
from flywheel.cache import shared_cache
from flywheel.models import Tenant
from routing.answering.query_input import query_request
from routing.answering.service import answer_question
from routing.selection.breaker import MIN_ATTEMPTS, breaker_settle
from routing.selection.state import routing_policy_get
from tests.captured import response
from tests.conftest import clear_own_cache_keys
from tests.routing_world import World, refresh

pytestmark = pytest.mark.django_db(transaction=True)

REVIEW = "Please review my pull request"


@pytest.fixture(autouse=True)
def _ranked_by_match_alone(world: World) -> None:
    """Routing's performance memory demotes a failing backend too (a batch of decisions
    later); with its weight at 0 the breaker alone keeps a failing primary away."""
    policy = routing_policy_get()
    policy.weight_performance = 0
    policy.save()
    refresh()


def ask(tenant: Tenant, **fields: Any) -> dict[str, Any]:
    return async_to_sync(answer_question)(query_request(fields), tenant=tenant)


def answered_by(tenant: Tenant) -> str:
    body = ask(tenant, question=REVIEW)
    breaker_settle()
    return str(body["routing"]["backend"])


def health_of(world: World) -> BackendHealth:
    return BackendHealth.objects.get(backend=world.fw)


def test_failing_answers_put_a_backend_in_cooldown_without_waiting_for_a_probe(
    world: World, tenant: Tenant, caplog: pytest.LogCaptureFixture
) -> None:
    world.fail(world.fw_route)  # its health endpoint would still say "up"

    served = [answered_by(tenant) for _ in range(MIN_ATTEMPTS + 10)]

    assert set(served) == {"lf"}  # every question answered, by fallback
    assert world.fw_route.call_count == MIN_ATTEMPTS  # then it was left alone
    health = health_of(world)
    assert health.cooldown_until is not None
    assert health.cooldown_until > timezone.now()
    assert health.needs_trial
    assert "5 of its last 5 answers failed" in health.last_error
    assert "Backend fw is in cooldown" in caplog.text


def test_a_backend_failing_a_third_of_its_answers_keeps_its_breaker_closed(
    world: World, tenant: Tenant
) -> None:
    ok = response("flowise", "prediction_agentflow")
    world.fw_route.side_effect = [ok, ok, world_error(), ok, ok, world_error()] * 5

    served = [answered_by(tenant) for _ in range(30)]

    assert served.count("fw") == 20  # the failures fell back; fw kept its share
    assert health_of(world).cooldown_until is None


def world_error() -> Any:
    import httpx

    return httpx.Response(500, json={"message": "boom"})


def _cooldown_passes(world: World) -> None:
    """What the cooldown's minute does: it ends, and the failures that opened it are
    older than routing's performance memory keeps (performance_max_age_seconds)."""
    BackendHealth.objects.filter(backend=world.fw).update(
        cooldown_until=timezone.now() - timedelta(seconds=1)
    )
    clear_own_cache_keys(shared_cache().inner)  # the aggregates aged out
    refresh()


def test_after_the_cooldown_one_query_tries_the_backend_and_its_answer_closes_the_breaker(
    world: World, tenant: Tenant
) -> None:
    world.fail(world.fw_route)
    for _ in range(MIN_ATTEMPTS):
        answered_by(tenant)
    assert health_of(world).needs_trial
    _cooldown_passes(world)

    async def healed_but_slow(request: Any) -> Any:  # every query plans before it answers
        await asyncio.sleep(0.3)
        return response("flowise", "prediction_agentflow")

    world.fw_route.mock(side_effect=healed_but_slow)
    calls = world.fw_route.call_count

    async def together() -> list[dict[str, Any]]:
        return await asyncio.gather(
            *(answer_question(query_request({"question": REVIEW}), tenant=tenant) for _ in range(8))
        )

    bodies = async_to_sync(together)()
    breaker_settle()

    assert world.fw_route.call_count == calls + 1  # the trial, not the whole load
    assert sorted(b["routing"]["backend"] for b in bodies) == ["fw"] + ["lf"] * 7
    health = health_of(world)
    assert (health.needs_trial, health.cooldown_until) == (False, None)
    assert answered_by(tenant) == "fw"  # back in rotation


def test_a_failed_trial_opens_the_breaker_for_another_cooldown(
    world: World, tenant: Tenant
) -> None:
    world.fail(world.fw_route)
    for _ in range(MIN_ATTEMPTS):
        answered_by(tenant)
    _cooldown_passes(world)

    assert answered_by(tenant) == "lf"  # the trial went to fw, failed, and fell back

    health = health_of(world)
    assert health.needs_trial
    assert health.cooldown_until is not None
    assert health.cooldown_until > timezone.now()
    assert "its trial failed" in health.last_error
    calls = world.fw_route.call_count
    assert answered_by(tenant) == "lf"
    assert world.fw_route.call_count == calls


def test_a_dry_run_does_not_take_the_trial(world: World, tenant: Tenant) -> None:
    world.fail(world.fw_route)
    for _ in range(MIN_ATTEMPTS):
        answered_by(tenant)
    _cooldown_passes(world)
    from routing.answering.service import route_question

    planned = async_to_sync(route_question)(query_request({"question": REVIEW}), tenant=tenant)

    assert [c["backend"] for c in planned["candidates"]] == ["lf"]
    world.fw_route.mock(return_value=response("flowise", "prediction_agentflow"))
    assert answered_by(tenant) == "fw"  # the trial was still free for a real query

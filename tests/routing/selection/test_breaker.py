"""The traffic breaker: failing answers open a cooldown; one trial query closes it."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.utils import timezone

from backends.models import BackendHealth
from backends.services import ahealth_check
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


@pytest.fixture
def other() -> Tenant:
    return Tenant.objects.create(name="Beta", slug="beta")


def taking_turns(first: Tenant, second: Tenant, queries: int) -> list[Tenant]:
    """Whose each of ``queries`` queries is, the two tenants taking turns: a shared
    backend opens on the failures of more than one tenant (one's alone do not)."""
    return [(first, second)[n % 2] for n in range(queries)]


def tripped(world: World, tenant: Tenant, other: Tenant) -> None:
    """fw fails for both tenants until its breaker opens."""
    world.fail(world.fw_route)
    for each in taking_turns(tenant, other, MIN_ATTEMPTS):
        answered_by(each)


def test_failing_answers_put_a_backend_in_cooldown_without_waiting_for_a_probe(
    world: World, tenant: Tenant, other: Tenant, caplog: pytest.LogCaptureFixture
) -> None:
    world.fail(world.fw_route)  # its health endpoint would still say "up"

    served = [answered_by(each) for each in taking_turns(tenant, other, MIN_ATTEMPTS + 10)]

    assert set(served) == {"lf"}  # every question answered, by fallback
    assert world.fw_route.call_count == MIN_ATTEMPTS  # then it was left alone
    health = health_of(world)
    assert health.cooldown_until is not None
    assert health.cooldown_until > timezone.now()
    assert health.needs_trial
    assert "5 of its last 5 answers failed" in health.last_error
    assert "Backend fw is in cooldown" in caplog.text


def test_a_backend_failing_a_third_of_its_answers_keeps_its_breaker_closed(
    world: World, tenant: Tenant, other: Tenant
) -> None:
    ok = response("flowise", "prediction_agentflow")
    world.fw_route.side_effect = [ok, ok, world_error(), ok, ok, world_error()] * 5

    served = [answered_by(each) for each in taking_turns(tenant, other, 30)]

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
    world: World, tenant: Tenant, other: Tenant
) -> None:
    tripped(world, tenant, other)
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
    world: World, tenant: Tenant, other: Tenant
) -> None:
    tripped(world, tenant, other)
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


def test_a_dry_run_does_not_take_the_trial(world: World, tenant: Tenant, other: Tenant) -> None:
    tripped(world, tenant, other)
    _cooldown_passes(world)
    from routing.answering.service import route_question

    planned = async_to_sync(route_question)(query_request({"question": REVIEW}), tenant=tenant)

    assert [c["backend"] for c in planned["candidates"]] == ["lf"]
    world.fw_route.mock(return_value=response("flowise", "prediction_agentflow"))
    assert answered_by(tenant) == "fw"  # the trial was still free for a real query


# --- fair health: whose fault a failure is, and whose failures they are --------------

POISONED = REVIEW + " (a question this server chokes on)"


def too_large() -> Any:
    """A Flowise behind a body limit refusing a request (body-parser's PayloadTooLargeError,
    in the error shape of Flowise's other refusals in tests/fixtures/flowise)."""
    import httpx

    return httpx.Response(
        413,
        json={
            "statusCode": 413,
            "success": False,
            "message": "request entity too large",
            "stack": {},
        },
    )


def fails_on_poison(world: World, failure: Any) -> None:
    """fw answers every question as captured, except POISONED ones: those get ``failure()``."""

    def answer(request: Any) -> Any:
        if b"chokes on" in request.content:
            return failure()
        return response("flowise", "prediction_agentflow")

    world.fw_route.mock(side_effect=answer)


def poisoned_by(tenant: Tenant) -> str:
    body = ask(tenant, question=POISONED)
    breaker_settle()
    return str(body["routing"]["backend"])


def test_a_tenant_whose_requests_a_shared_backend_refuses_does_not_bench_it(
    world: World, tenant: Tenant, other: Tenant
) -> None:
    fails_on_poison(world, too_large)

    served = [poisoned_by(tenant) for _ in range(MIN_ATTEMPTS + 5)]

    assert set(served) == {"lf"}  # each refused (413), then answered by fallback
    assert world.fw_route.call_count == MIN_ATTEMPTS + 5  # fw was never left out
    assert health_of(world).cooldown_until is None
    assert answered_by(other) == "fw"


def test_refusals_of_what_callers_sent_never_count_against_the_backend(
    world: World, tenant: Tenant, other: Tenant
) -> None:
    world.fail(world.fw_route, 413)  # every tenant's requests refused: the server is up
    for _ in range(MIN_ATTEMPTS):
        assert poisoned_by(tenant) == "lf"
        assert poisoned_by(other) == "lf"

    health = health_of(world)
    assert (health.cooldown_until, health.needs_trial) == (None, False)


def test_one_tenants_failures_do_not_open_a_shared_backend_for_the_others(
    world: World, tenant: Tenant, other: Tenant
) -> None:
    fails_on_poison(world, world_error)  # a 500: the backend's failure, but only A sees it

    served = [poisoned_by(tenant) for _ in range(MIN_ATTEMPTS + 5)]

    assert set(served) == {"lf"}
    assert world.fw_route.call_count == MIN_ATTEMPTS + 5
    assert health_of(world).cooldown_until is None
    assert answered_by(other) == "fw"


def test_a_second_tenant_failing_too_opens_the_shared_backend(
    world: World, tenant: Tenant, other: Tenant
) -> None:
    fails_on_poison(world, world_error)
    for _ in range(MIN_ATTEMPTS):
        poisoned_by(tenant)
    assert health_of(world).cooldown_until is None

    world.fail(world.fw_route)  # now it fails for everyone
    assert answered_by(other) == "lf"

    health = health_of(world)
    assert health.needs_trial
    assert health.cooldown_until is not None
    assert "6 of its last 6 answers failed" in health.last_error


def test_a_failing_probe_backs_one_tenants_failures(
    world: World, tenant: Tenant, other: Tenant
) -> None:
    policy = routing_policy_get()
    policy.weight_health = 0  # fw, unhealthy by its probe, still ranks first
    policy.save()
    world.router.get("http://fw.test/api/v1/ping").mock(return_value=world_error())
    async_to_sync(ahealth_check)(world.fw)  # what beat does every 30 s
    refresh()
    assert health_of(world).cooldown_until is None  # one failed probe alone opens nothing
    fails_on_poison(world, world_error)

    for _ in range(MIN_ATTEMPTS):
        poisoned_by(tenant)

    assert health_of(world).needs_trial
    assert answered_by(other) == "lf"


def test_a_tenants_own_backend_opens_on_its_own_failures(world: World, tenant: Tenant) -> None:
    from backends.models import Backend
    from chatflows.models import Flow

    mine = Backend.objects.create(
        name="mine", kind="flowise", base_url="http://mine.test", api_key="k", tenant=tenant
    )
    BackendHealth.objects.create(backend=mine, healthy=True)
    keywords = ["code-review", "pull request", *(f"review {n}" for n in range(8))]
    Flow.objects.create(
        backend=mine, external_id="mine-1", name="mine", deployed=True, intent_keywords=keywords
    )
    route = world.router.post(url__regex=r"http://mine\.test/api/v1/prediction/.*")
    world.fail(route)
    refresh()

    served = [answered_by(tenant) for _ in range(MIN_ATTEMPTS + 5)]

    assert set(served) == {"fw"}  # its own backend first, then the shared fallback
    assert route.call_count == MIN_ATTEMPTS  # then it was left alone
    health = BackendHealth.objects.get(backend=mine)
    assert health.needs_trial
    assert "5 of its last 5 answers failed" in health.last_error


def half_open(world: World) -> bool:
    """Past its cooldown and waiting for a trial (not opened again)."""
    health = health_of(world)
    return health.needs_trial and (health.cooldown_until or timezone.now()) <= timezone.now()


def _opened_by_two_tenants(world: World, tenant: Tenant, other: Tenant) -> None:
    tripped(world, tenant, other)
    assert health_of(world).needs_trial
    _cooldown_passes(world)


def test_a_trial_refused_for_what_the_caller_sent_decides_nothing(
    world: World, tenant: Tenant, other: Tenant
) -> None:
    _opened_by_two_tenants(world, tenant, other)
    fails_on_poison(world, too_large)
    calls = world.fw_route.call_count

    assert poisoned_by(tenant) == "lf"  # it took the trial, was refused, fell back

    assert world.fw_route.call_count == calls + 1
    assert half_open(world)  # not opened again
    assert answered_by(other) == "fw"  # the next query took the trial, and closed it
    health = health_of(world)
    assert (health.needs_trial, health.cooldown_until) == (False, None)

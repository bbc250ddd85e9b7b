"""The traffic breaker: failing answers take a flow (for an intent) or a whole backend out of
rotation for a cooldown; one trial query puts it back."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import httpx
import pytest
from asgiref.sync import async_to_sync
from django.utils import timezone

from backends.models import Backend, BackendHealth
from backends.services import ahealth_check
from chatflows.models import Flow
from flywheel.cache import shared_cache
from flywheel.models import Tenant
from routing.answering.query_input import query_request
from routing.answering.service import answer_question
from routing.selection import planning
from routing.selection.breaker import MIN_ATTEMPTS, breaker_settle, scope_key
from routing.selection.estimates import estimate
from routing.selection.scoring import BackendEntry, EstimateOf
from routing.selection.state import SCOPES_KEY, RoutingState
from tests.captured import response
from tests.conftest import clear_own_cache_keys
from tests.routing_world import World, refresh

pytestmark = pytest.mark.django_db(transaction=True)

REVIEW = "Please review my pull request"


def _the_prior_alone(state: RoutingState, backends: list[BackendEntry], intent: str) -> EstimateOf:
    prior = estimate(None, state.policy.prior)
    return lambda backend, flow: prior


@pytest.fixture(autouse=True)
def _breaker_alone(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    """Routing's learned estimates demote a failing backend too (at its first failure);
    with every flow judged by the prior alone, candidates tie and go in the order of
    their weight, then name (the world does not explore): the breaker alone keeps a
    failing fw away."""
    monkeypatch.setattr(planning, "estimates_for", _the_prior_alone)


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


def refuse(route: Any) -> None:
    """Nobody answers at the backend's address: the connection is refused."""
    route.mock(side_effect=httpx.ConnectError("refused"))


def tripped(world: World, tenant: Tenant, other: Tenant) -> None:
    """fw refuses the connections of both tenants until its breaker opens."""
    refuse(world.fw_route)
    for each in taking_turns(tenant, other, MIN_ATTEMPTS):
        answered_by(each)


def open_scopes() -> dict[str, dict[str, Any]]:
    """The flow scopes out of rotation, "backend:flow:intent" -> {"until", "reason"}."""
    return dict(shared_cache().get(SCOPES_KEY) or {})


def scope_of(backend: Backend, flow: Flow, intent: str = "code-review") -> str:
    return scope_key((backend.pk, flow.pk, intent))


def test_refused_connections_put_a_backend_in_cooldown_without_waiting_for_a_probe(
    world: World, tenant: Tenant, other: Tenant, caplog: pytest.LogCaptureFixture
) -> None:
    refuse(world.fw_route)  # down since the last probe, which said "up"

    served = [answered_by(each) for each in taking_turns(tenant, other, MIN_ATTEMPTS + 10)]

    assert set(served) == {"lf"}  # every question answered, by fallback
    assert world.fw_route.call_count == MIN_ATTEMPTS  # then it was left alone
    health = health_of(world)
    assert health.cooldown_until is not None
    assert health.cooldown_until > timezone.now()
    assert health.needs_trial
    assert "5 of its last 5 answers failed (ConnectionError)" in health.last_error
    assert "Backend fw is in cooldown" in caplog.text
    assert open_scopes() == {}  # the backend, not one of its flows


def test_failures_of_one_flow_for_one_intent_take_only_that_flow_out_of_rotation(
    world: World, tenant: Tenant, other: Tenant, caplog: pytest.LogCaptureFixture
) -> None:
    """The reviewer fails code reviews (500s): fw keeps serving code reviews with its
    other flow, and other intents with the reviewer."""
    Flow.objects.create(
        backend=world.fw,
        external_id="spare-reviewer",
        name="spare",
        deployed=True,
        intent_keywords=["code-review"],  # a weaker match than the reviewer's
    )
    world.fw_flow.intent_keywords = [*world.fw_flow.intent_keywords, "technical-analysis"]
    world.fw_flow.save()
    refresh()
    reviewer_fails = {"on": True}

    def answer(request: httpx.Request) -> httpx.Response:
        if reviewer_fails["on"] and world.fw_flow.external_id in str(request.url):
            return world_error()
        return response("flowise", "prediction_agentflow")

    world.fw_route.mock(side_effect=answer)

    served = [answered_by(each) for each in taking_turns(tenant, other, MIN_ATTEMPTS)]

    assert set(served) == {"lf"}  # the reviewer failed each, lf answered
    assert list(open_scopes()) == [scope_of(world.fw, world.fw_flow)]
    reason = open_scopes()[scope_of(world.fw, world.fw_flow)]["reason"]
    assert "5 of its last 5 code-review answers failed (UnexpectedError)" in reason
    assert "fw / reviewer for code-review is out of rotation" in caplog.text
    health = health_of(world)
    assert (health.cooldown_until, health.needs_trial) == (None, False)  # fw is not benched
    body = ask(tenant, question=REVIEW, backend="fw")  # fw still serves code reviews
    assert (body["routing"]["backend"], body["routing"]["flow"]) == ("fw", "spare")
    reviewer_fails["on"] = False
    other_intent = ask(tenant, question=REVIEW, intent="technical-analysis")
    assert (other_intent["routing"]["backend"], other_intent["routing"]["flow"]) == (
        "fw",
        "reviewer",
    )


def test_failures_of_every_flow_tried_put_the_whole_backend_in_cooldown(
    world: World, tenant: Tenant, other: Tenant
) -> None:
    """fw fails (500s) with both its flows, each for its own intent: too few for either
    flow's breaker, but together the failures are the backend's."""
    Flow.objects.create(
        backend=world.fw,
        external_id="analyst",
        name="analyst",
        deployed=True,
        intent_keywords=["technical-analysis"],
    )
    refresh()
    world.fail(world.fw_route)

    for n, each in enumerate(taking_turns(tenant, other, MIN_ATTEMPTS)):
        intent = ("code-review", "technical-analysis")[n % 2]
        body = ask(each, question=REVIEW, intent=intent)
        breaker_settle()
        assert body["routing"]["backend"] == "lf"  # by its echo, or its generic flow

    health = health_of(world)
    assert health.needs_trial
    assert health.cooldown_until is not None
    assert "5 of its last 5 answers failed (UnexpectedError)" in health.last_error
    assert open_scopes() == {}
    calls = world.fw_route.call_count
    assert answered_by(tenant) == "lf"
    assert world.fw_route.call_count == calls  # in cooldown, for every flow


def test_a_flow_answering_its_trial_after_the_cooldown_goes_back_in_rotation(
    world: World, tenant: Tenant, other: Tenant
) -> None:
    world.fail(world.fw_route)  # a 500 from the reviewer: its flow scope opens
    for each in taking_turns(tenant, other, MIN_ATTEMPTS):
        answered_by(each)
    key = scope_of(world.fw, world.fw_flow)
    scopes = open_scopes()
    assert list(scopes) == [key]
    assert answered_by(tenant) == "lf"  # in its cooldown, passed by
    calls = world.fw_route.call_count
    scopes[key]["until"] = (timezone.now() - timedelta(seconds=1)).timestamp()
    shared_cache().set(SCOPES_KEY, scopes)  # the cooldown passes
    refresh()
    world.fw_route.mock(return_value=response("flowise", "prediction_agentflow"))

    assert answered_by(tenant) == "fw"  # the trial: it answered

    assert world.fw_route.call_count == calls + 1
    assert open_scopes() == {}
    refresh()
    assert answered_by(other) == "fw"  # back in rotation


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
    """What the cooldown's minute does: it ends, and what routing learned of the
    failures that opened it has faded (two half-lives: the cache emptied)."""
    BackendHealth.objects.filter(backend=world.fw).update(
        cooldown_until=timezone.now() - timedelta(seconds=1)
    )
    clear_own_cache_keys(shared_cache().inner)
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

    assert answered_by(tenant) == "lf"  # the trial went to fw, was refused, and fell back

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

    assert [(c["backend"], c["flow"]) for c in planned["candidates"]] == [
        ("lf", "echo"),
        ("lf", "anything"),
    ]
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
    assert open_scopes() == {}  # nor its flow
    assert answered_by(other) == "fw"


def test_a_second_tenant_failing_too_opens_the_shared_backends_flow(
    world: World, tenant: Tenant, other: Tenant
) -> None:
    fails_on_poison(world, world_error)
    for _ in range(MIN_ATTEMPTS):
        poisoned_by(tenant)
    assert open_scopes() == {}

    world.fail(world.fw_route)  # now it fails for everyone
    assert answered_by(other) == "lf"

    scopes = open_scopes()
    assert list(scopes) == [scope_of(world.fw, world.fw_flow)]
    assert (
        "6 of its last 6 code-review answers failed"
        in scopes[scope_of(world.fw, world.fw_flow)]["reason"]
    )
    assert answered_by(tenant) == "lf"  # out of rotation for both
    assert health_of(world).cooldown_until is None  # one flow's failures: fw is not benched


def test_a_failing_probe_backs_one_tenants_failures(
    world: World, tenant: Tenant, other: Tenant
) -> None:
    # lf serves code reviews only with its generic flow: fw, unhealthy by its probe,
    # still comes first (a flow made for the intent before a generic one).
    Flow.objects.filter(pk=world.lf_flow.pk).update(intent_keywords=["summarize"])
    world.router.get("http://fw.test/api/v1/ping").mock(return_value=world_error())
    async_to_sync(ahealth_check)(world.fw)  # what beat does every 30 s
    refresh()
    assert health_of(world).cooldown_until is None  # one failed probe alone opens nothing
    fails_on_poison(world, world_error)

    for _ in range(MIN_ATTEMPTS):
        poisoned_by(tenant)

    assert list(open_scopes()) == [scope_of(world.fw, world.fw_flow)]
    assert answered_by(other) == "lf"


def test_a_tenants_own_backend_opens_on_its_own_failures(world: World, tenant: Tenant) -> None:
    mine = Backend.objects.create(
        name="mine",
        kind="flowise",
        base_url="http://mine.test",
        api_key="k",
        tenant=tenant,
        weight=2.0,  # the heavier: first of equals
    )
    BackendHealth.objects.create(backend=mine, healthy=True)
    keywords = ["code-review", "pull request", *(f"review {n}" for n in range(8))]
    flow = Flow.objects.create(
        backend=mine, external_id="mine-1", name="mine", deployed=True, intent_keywords=keywords
    )
    route = world.router.post(url__regex=r"http://mine\.test/api/v1/prediction/.*")
    world.fail(route)
    refresh()

    served = [answered_by(tenant) for _ in range(MIN_ATTEMPTS + 5)]

    assert set(served) == {"fw"}  # its own backend first, then the shared fallback
    assert route.call_count == MIN_ATTEMPTS  # then it was left alone
    scopes = open_scopes()
    assert list(scopes) == [scope_of(mine, flow)]
    assert "5 of its last 5 code-review answers failed" in scopes[scope_of(mine, flow)]["reason"]


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


def test_scopes_opened_at_once_by_many_threads_are_all_kept(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each opening reads, changes and writes back the one key of open scopes: without
    its lock, two at once lose one of them (seen with two processes)."""
    from concurrent.futures import ThreadPoolExecutor
    from threading import Barrier

    from django.db import connections

    from routing.selection import breaker
    from routing.selection.breaker import Change, breaker_apply

    # The policy read once here: sixteen threads reading it at once would grow the
    # database pool this test process shares with the tests after it.
    policy = breaker.health_policy()
    monkeypatch.setattr(breaker, "health_policy", lambda: policy)

    scopes = [(world.fw.pk, 1000 + n, "code-review") for n in range(16)]
    start = Barrier(len(scopes))

    def open_one(scope: tuple[int, int, str]) -> None:
        try:
            start.wait()
            breaker_apply([Change(scope, f"fw / flow {scope[1]}", opened=True, reason="test")])
        finally:
            connections.close_all()

    with ThreadPoolExecutor(len(scopes)) as pool:
        list(pool.map(open_one, scopes))

    assert set(open_scopes()) == {scope_key(s) for s in scopes}


def test_a_backend_that_still_answers_one_of_its_flows_is_not_opened_whole() -> None:
    """After a swap, a backend fails every document question and two general questions
    in three: both flows fail at least half, but its general flow still answers, so the
    backend itself is up. Only the failing flow's scope opens; the backend keeps the
    intents it never fails (it was benched from them for 120 s in the simulator)."""
    from routing.selection.attempt import Attempt
    from routing.selection.breaker import Windows

    windows = Windows()
    changes = []
    for n in range(10):
        documents = n % 2 == 0
        ok = not documents and n % 3 == 0  # general: answers n = 3, 9
        attempt = Attempt(1, "b1", 11 if documents else 12, "f", ok, 50.0,
                          "" if ok else "UnexpectedError")  # fmt: skip
        change = windows.note(
            attempt,
            "document-qa" if documents else "general",
            tenant_id=1,
            shared=False,
            probe_failed=False,
            on_trial=lambda scope: False,
        )
        if change is not None:
            changes.append(change.scope)
    assert changes == [(1, 11, "document-qa")]  # never (1,): the backend


class _Contended:
    """A cache whose lock key is held by another for the first ``busy`` takes, released
    again before every read: what a fast holder looks like to a thread that lost the
    race."""

    def __init__(self, busy: int) -> None:
        self.busy = busy
        self.takes = 0

    def add(self, key: str, value: object, timeout: object = None) -> bool:
        self.takes += 1
        return self.takes > self.busy

    def get(self, key: str, default: object = None) -> object:
        return default

    def delete(self, key: str) -> None:
        pass


class _Down(_Contended):
    def add(self, key: str, value: object, timeout: object = None) -> bool:
        self.takes += 1
        raise ConnectionError("the cache is down")


def test_a_lock_freed_between_reads_is_waited_for_not_taken_for_a_failing_cache(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Sixteen threads opening scopes at once lost one (CI): a thread that missed the lock
    and then saw it free twice took the cache for failing and wrote without it."""
    from flywheel.cache import DegradingCache
    from routing.selection import breaker

    inner = _Contended(busy=3)
    monkeypatch.setattr(breaker, "shared_cache", lambda: DegradingCache(inner))
    with breaker._scopes_held():
        pass
    assert inner.takes == 4
    assert "without their lock" not in caplog.text


def test_a_down_cache_is_not_waited_for(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from flywheel.cache import DegradingCache
    from routing.selection import breaker

    inner = _Down(busy=0)
    monkeypatch.setattr(breaker, "shared_cache", lambda: DegradingCache(inner))
    with breaker._scopes_held():
        pass
    assert inner.takes == 1
    assert "without their lock" in caplog.text

"""The universal query service (seed 000's testing strategy, on PostgreSQL)."""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import httpx
import pytest
from asgiref.sync import async_to_sync
from django.test import override_settings
from django.utils import timezone
from rest_framework.test import APIClient

from backends.models import Backend
from flywheel.cache import shared_cache
from flywheel.errors import ApplicationError, NotFoundError, ValidationError
from flywheel.models import Tenant
from routing.answering.conversation import answer_from_history
from routing.answering.query_input import query_request
from routing.answering.service import answer_question, answers_finish, stream_answer
from routing.answering.sessions import SESSION_KEY, PastTurn
from routing.errors import AllBackendsFailedError, BackendUnavailableError, NoMatchingFlowError
from routing.install import defaults_load
from routing.models import PerformanceRecord, RoutingDecision, RoutingPolicy, Session, Turn
from routing.recording.compact import read
from routing.recording.performance import evidence_publish_all
from routing.recording.writer import drain
from routing.selection import learning
from routing.selection.estimates import Prior, estimate
from routing.selection.state import routing_policy_get
from tests.captured import FIXTURES, captured, response
from tests.routing_world import FW_ANSWER, LF_ANSWER, World, refresh

pytestmark = pytest.mark.django_db(transaction=True)

REVIEW = "Please review my pull request"
# A flow with no history is judged by the prior: 80 % success, 1 s typical latency.
NO_HISTORY_PERFORMANCE = round(0.7 * 0.8 + 0.3 * (1 - 1000 / 5000), 4)


def ask(tenant: Tenant, **fields: Any) -> dict[str, Any]:
    try:
        return async_to_sync(answer_question)(query_request(fields), tenant=tenant)
    finally:
        drain()  # decisions are written behind the answer


def fails(tenant: Tenant, error: type[ApplicationError], **fields: Any) -> ApplicationError:
    with pytest.raises(error) as raised:
        ask(tenant, **fields)
    return raised.value


# --- classification -------------------------------------------------------------


def test_it_classifies_the_intent_automatically(world: World, tenant: Tenant) -> None:
    routing = ask(tenant, question=REVIEW)["routing"]

    assert (routing["intent"], routing["method"]) == ("code-review", "rules")
    assert routing["intent_confidence"] >= 0.7
    assert routing["evidence"]


def test_the_decision_records_why_the_intent_was_chosen(world: World, tenant: Tenant) -> None:
    body = ask(tenant, question=REVIEW)

    decision = RoutingDecision.objects.get()
    evidence = decision.evidence
    assert evidence["intent"]
    assert all(isinstance(rule, int) for rule in evidence["intent"])  # kept by id
    said = body["routing"]["evidence"]
    # The rules' summary is said again from the question and the rules, not kept.
    assert "intent_summary" not in evidence
    kept = read(decision).evidence
    assert said == {"summary": kept["intent_summary"], "raw": kept["intent"]}
    # In words: what the question said, not the patterns (those stay in raw).
    assert said["summary"].startswith("matched 'my pull request' and 'review' (code-review rules ")
    assert all(pattern not in said["summary"] for pattern in said["raw"] if "\\" in pattern)
    assert "query_type" not in evidence  # query routing is off


def test_an_intent_override_skips_classification(world: World, tenant: Tenant) -> None:
    routing = ask(tenant, question="hello", intent="code-review")["routing"]

    assert (routing["intent"], routing["method"], routing["intent_confidence"]) == (
        "code-review",
        "override",
        1.0,
    )


def test_an_unknown_intent_is_rejected_and_recorded(world: World, tenant: Tenant) -> None:
    error = fails(tenant, ValidationError, question="hello", intent="astrology")

    decision = RoutingDecision.objects.get()
    assert (decision.outcome, decision.error_type) == ("rejected", "ValidationError")
    assert error.details["request_id"] == str(decision.request_id)
    assert not world.fw_route.called


# --- backend selection -----------------------------------------------------------


def test_auto_routing_picks_the_highest_score(world: World, tenant: Tenant) -> None:
    body = ask(tenant, question=REVIEW)

    routing = body["routing"]
    assert body["answer"] == FW_ANSWER
    assert (routing["backend"], routing["flow"]) == ("fw", "reviewer")
    # Tried in increasing order of the expected time to an answer; the score is reported.
    expected = [c["expected_seconds"] for c in routing["candidates"]]
    assert expected == sorted(expected)
    assert routing["score"] == routing["candidates"][0]["score"]


@pytest.mark.parametrize("preference", ["lf", "LF", "langflow"])
def test_an_explicit_backend_name_or_kind_routes_there(
    world: World, tenant: Tenant, preference: str
) -> None:
    body = ask(tenant, question=REVIEW, backend=preference)

    assert body["answer"] == LF_ANSWER
    assert body["routing"]["routing_method"] == "explicit"
    assert not world.fw_route.called


def test_an_explicit_route_records_the_backends_real_factor_scores(
    world: World, tenant: Tenant
) -> None:
    world.fail(world.lf_route)
    with pytest.raises(AllBackendsFailedError):
        ask(tenant, question=REVIEW, backend="lf", fallback=False)
    world.lf_route.mock(return_value=response("langflow", "run_echo"))  # back

    body = ask(tenant, question="and again?", intent="code-review", backend="lf", fallback=False)

    candidates = body["routing"]["candidates"]
    # lf alone: its flow for the intent, then its generic flow, both failed once.
    assert [c["flow"] for c in candidates] == ["echo", "anything"]
    for candidate in candidates:
        assert candidate["performance"] < NO_HISTORY_PERFORMANCE  # its one attempt failed
        assert candidate["success"] < 0.8  # below the prior's
        assert candidate["score"] == pytest.approx(
            0.5 * candidate["match"] + 0.3 * candidate["health"] + 0.2 * candidate["performance"],
            abs=1e-3,
        )


def test_an_unknown_explicit_backend_is_a_clear_error(world: World, tenant: Tenant) -> None:
    error = fails(tenant, ValidationError, question=REVIEW, backend="n8n")

    assert "n8n" in error.message
    assert RoutingDecision.objects.get().outcome == "rejected"


def test_an_unavailable_explicit_backend_is_a_clear_error_without_fallback(
    world: World, tenant: Tenant
) -> None:
    world.set_health(world.lf, healthy=False)

    error = fails(tenant, BackendUnavailableError, question=REVIEW, backend="lf", fallback=False)

    assert "unavailable" in error.message
    assert not world.lf_route.called


def test_a_named_backend_falls_back_to_the_others_unless_told_not_to(
    world: World, tenant: Tenant
) -> None:
    """Seed 000: naming a backend is a preference, and fallback still saves the question
    (it was refused: AllBackendsFailed, or BackendUnavailable when it was down)."""
    world.fail(world.lf_route)
    failed_over = ask(tenant, question=REVIEW, backend="lf")
    world.set_health(world.lf, healthy=False)
    down = ask(tenant, question=REVIEW, backend="langflow")

    assert [(a["backend"], a["flow"]) for a in failed_over["routing"]["fallback_chain"]] == [
        ("lf", "echo"),
        ("lf", "anything"),  # lf's generic flow, before the backends not named
        ("fw", "reviewer"),
    ]
    assert failed_over["routing"]["routing_method"] == "explicit"
    assert down["routing"]["backend"] == "fw"
    assert [a["backend"] for a in down["routing"]["fallback_chain"]] == ["fw"]


def test_health_influences_selection(world: World, tenant: Tenant) -> None:
    world.set_health(world.fw, healthy=False)

    routing = ask(tenant, question=REVIEW)["routing"]

    assert routing["backend"] == "lf"
    # Among the flows made for the intent; lf's generic flow comes after them all.
    assert [(c["backend"], c["generic"], c["health"]) for c in routing["candidates"]] == [
        ("lf", False, 1.0),
        ("fw", False, 0.0),
        ("lf", True, 1.0),
    ]


def test_performance_history_influences_selection(world: World, tenant: Tenant) -> None:
    world.fail(world.fw_route)
    assert ask(tenant, question=REVIEW)["routing"]["fallback_used"] is True
    world.fw_route.mock(return_value=httpx.Response(200, json={"text": "fw is back"}))
    calls = world.fw_route.call_count

    routing = ask(tenant, question=REVIEW)["routing"]

    assert routing["backend"] == "lf"  # fw failed last time: it now ranks second
    assert routing["fallback_used"] is False
    assert world.fw_route.call_count == calls
    assert [(c["backend"], c["flow"]) for c in routing["candidates"]] == [
        ("lf", "echo"),
        ("fw", "reviewer"),
        ("lf", "anything"),  # generic: after the flows made for the intent
    ]
    assert routing["candidates"][1]["performance"] < routing["candidates"][0]["performance"]


def test_backends_in_cooldown_are_skipped(world: World, tenant: Tenant) -> None:
    world.set_health(world.fw, healthy=False, cooldown=True)

    routing = ask(tenant, question=REVIEW)["routing"]

    assert [(c["backend"], c["flow"]) for c in routing["candidates"]] == [
        ("lf", "echo"),
        ("lf", "anything"),
    ]
    assert not world.fw_route.called


def test_all_backends_down_with_nothing_cached_is_an_error(world: World, tenant: Tenant) -> None:
    world.set_health(world.fw, healthy=False, cooldown=True)
    world.set_health(world.lf, healthy=False, cooldown=True)

    error = fails(tenant, AllBackendsFailedError, question=REVIEW)

    assert "down" in error.message
    assert RoutingDecision.objects.get().outcome == "failed"


# --- flow matching ---------------------------------------------------------------


def test_the_best_matching_flow_of_a_backend_is_used(world: World, tenant: Tenant) -> None:
    routing = ask(tenant, question=REVIEW, backend="lf")["routing"]

    assert routing["flow"] == "echo"  # a real match beats the generic flow


def test_no_matching_flow_falls_back_to_the_generic_flow(world: World, tenant: Tenant) -> None:
    routing = ask(tenant, question="According to the attached PDF, when is the deadline?")[
        "routing"
    ]

    assert routing["intent"] == "document-qa"
    assert (routing["backend"], routing["flow"]) == ("lf", "anything")
    assert routing["candidates"][0]["generic"] is True


def test_no_flow_at_all_is_an_error_naming_the_intent(world: World, tenant: Tenant) -> None:
    world.generic.delete()
    refresh()

    error = fails(tenant, NoMatchingFlowError, question="According to the attached PDF?")

    assert "document-qa" in error.message
    assert RoutingDecision.objects.get().outcome == "rejected"


def test_with_no_backend_registered_the_error_says_how_to_add_one(
    api_client: APIClient,
) -> None:
    defaults_load()  # intents and a policy, no backend: a fresh install

    body = api_client.post("/api/v1/query", {"question": REVIEW}, format="json").json()

    assert body["error"]["type"] == "NoMatchingFlow"
    assert body["error"]["message"].startswith("No backend is registered yet")
    assert "manage.py add_backend" in body["error"]["message"]
    assert body["error"]["details"]["backends"] == 0


# --- execution ---------------------------------------------------------------------


def test_an_answer_has_the_documented_shape(world: World, tenant: Tenant) -> None:
    body = ask(tenant, question=REVIEW)

    assert set(body) == {
        "answer",
        "session_id",
        "request_id",
        "backend_ids",  # Flowise's own ids of the exchange
        "routing",
        "trace_url",
        "session_url",
    }
    assert body["backend_ids"]["chatMessageId"]
    assert body["trace_url"] == f"/decisions/{body['request_id']}"
    assert body["session_url"] == f"/v/{body['session_id']}/"  # seed 002's visualisation
    assert set(body["routing"]) >= {
        "intent",
        "intent_confidence",
        "method",
        "query_type",
        "backend",
        "flow",
        "score",
        "candidates",
        "fallback_used",
        "fallback_chain",
        "timings",
    }
    assert set(body["routing"]["timings"]) == {"classify_ms", "route_ms", "execute_ms", "total_ms"}
    assert "SECRET" not in str(body)


def test_parameters_reach_the_backend(world: World, tenant: Tenant) -> None:
    # The flow's API configuration lets callers override both (found at discovery).
    world.tunable(
        world.fw_flow,
        ("temperature", "ChatOpenAI", "temperature"),
        ("max_tokens", "ChatOpenAI", "maxTokens"),
    )
    body = ask(tenant, question=REVIEW, parameters={"temperature": 0.3, "max_tokens": 99})

    override = world.sent_to_flowise()["overrideConfig"]
    assert (override["temperature"], override["maxTokens"]) == (0.3, 99)
    assert "warnings" not in body


def test_a_parameter_no_node_of_the_flow_takes_is_named_in_the_answers_warnings(
    world: World, tenant: Tenant
) -> None:
    world.tunable(world.fw_flow, ("max_tokens", "ChatOpenAI", "maxTokens"))
    body = ask(tenant, question=REVIEW, parameters={"temperature": 0.3, "max_tokens": 99})

    override = world.sent_to_flowise()["overrideConfig"]
    assert "temperature" not in override
    assert override["maxTokens"] == 99
    assert body["warnings"] == [
        "temperature was not applied: flow 'reviewer' on fw does not let callers override it "
        "(its API configuration's Override Config)."
    ]
    events = _collect(tenant, question=REVIEW, parameters={"stream": True, "temperature": 1})
    assert events[-1]["warnings"] == body["warnings"]


def test_langflow_gets_temperature_and_max_tokens_as_tweaks_of_its_model(
    world: World, tenant: Tenant
) -> None:
    world.tunable(
        world.lf_flow,
        ("temperature", "OpenAIModel-fake1", "temperature"),
        ("max_tokens", "OpenAIModel-fake1", "max_tokens"),
    )
    parameters = {"temperature": 0.3, "max_tokens": 99, "tweaks": {"ChatOutput-1": {"a": 1}}}
    body = ask(tenant, question=REVIEW, backend="lf", parameters=parameters)

    assert world.sent_to_langflow()["tweaks"] == {
        "ChatOutput-1": {"a": 1},
        "OpenAIModel-fake1": {"temperature": 0.3, "max_tokens": 99},
    }
    assert "warnings" not in body
    world.tunable(world.lf_flow)
    body = ask(tenant, question=REVIEW, backend="lf", parameters={"max_tokens": 5})
    assert "tweaks" not in world.sent_to_langflow()
    assert body["warnings"] == [
        "max_tokens was not applied: flow 'echo' on lf has no model component that takes it."
    ]


def test_a_session_continues_across_questions(world: World, tenant: Tenant) -> None:
    first = ask(tenant, question=REVIEW)
    second = ask(tenant, question="and refactor it too", session_id=first["session_id"])

    assert second["session_id"] == first["session_id"]
    assert world.sent_to_flowise(-1)["overrideConfig"]["sessionId"] == first["session_id"]
    assert second["routing"]["intent"] == "code-review"
    turns = Turn.objects.filter(session_id=first["session_id"]).order_by("created_at")
    assert [t.question for t in turns] == [REVIEW, "and refactor it too"]


def test_moving_to_another_backend_carries_the_recent_turns(world: World, tenant: Tenant) -> None:
    first = ask(tenant, question=REVIEW)
    assert first["routing"]["backend"] == "fw"

    ask(tenant, question="and now?", session_id=first["session_id"], backend="lf")

    sent = world.sent_to_langflow()["input_value"]
    assert sent.startswith("Conversation so far:")
    assert REVIEW in sent
    assert FW_ANSWER in sent


def test_moving_to_another_flow_of_the_same_backend_carries_the_turns_too(
    world: World, tenant: Tenant
) -> None:
    session = ask(tenant, question=REVIEW, backend="lf")["session_id"]
    assert "Conversation so far:" not in world.sent_to_langflow()["input_value"]

    body = ask(
        tenant, question="and the docs?", intent="document-qa", backend="lf", session_id=session
    )

    assert body["routing"]["flow"] == world.generic.name
    sent = world.sent_to_langflow()["input_value"]
    assert sent.startswith("Conversation so far:")
    assert REVIEW in sent


def test_a_short_follow_up_takes_the_conversations_intent(world: World, tenant: Tenant) -> None:
    first = ask(tenant, question=REVIEW)
    second = ask(tenant, question="and in Go?", session_id=first["session_id"])

    assert (second["routing"]["intent"], second["routing"]["method"]) == ("code-review", "context")


def test_turns_travel_only_when_the_backend_changes_and_at_most_five(
    world: World, tenant: Tenant
) -> None:
    session = ask(tenant, question=REVIEW)["session_id"]
    for i in range(5):
        ask(tenant, question=f"and refactor part {i} too", session_id=session)
    assert all("history" not in world.sent_to_flowise(i) for i in range(6))  # stayed on fw

    ask(tenant, question="and now?", session_id=session, backend="lf")

    sent = world.sent_to_langflow()["input_value"]
    assert REVIEW not in sent  # the sixth turn back stays behind
    assert all(f"and refactor part {i} too" in sent for i in range(5))


def test_a_long_answer_reaches_the_caller_whole_and_is_kept_within_bounds(
    world: World, tenant: Tenant, settings: Any
) -> None:
    settings.MAX_STORED_ANSWER_CHARS = 1_000
    long = "word " * 1_000  # 5,000 characters
    session = ask(tenant, question="Please review my other pull request")["session_id"]
    world.fw_route.mock(return_value=httpx.Response(200, json={"text": long}))

    second = ask(tenant, question=REVIEW, session_id=session)
    ask(tenant, question="and now?", session_id=session, backend="lf")

    assert second["answer"] == long
    kept = Turn.objects.get(question=REVIEW).answer
    assert 998 <= len(kept) <= 1_000
    assert kept.startswith("word word")
    assert kept.endswith("more characters]")
    cached = shared_cache().get(SESSION_KEY.format(id=session))
    assert cached["turns"][1]["answer"] == kept
    # What travels on with the conversation is what was kept.
    assert kept in world.sent_to_langflow()["input_value"]
    assert long not in world.sent_to_langflow()["input_value"]


def test_the_history_sent_on_keeps_the_newest_turns_within_its_budget(
    world: World, tenant: Tenant, settings: Any
) -> None:
    settings.HISTORY_BUDGET_CHARS = 600
    answers = iter([f"answer {i} " + "z" * 200 for i in range(4)])
    world.fw_route.mock(
        side_effect=lambda request: httpx.Response(200, json={"text": next(answers)})
    )
    session = ask(tenant, question=REVIEW)["session_id"]
    for i in range(3):
        ask(tenant, question=f"and refactor part {i} too", session_id=session)

    ask(tenant, question="and now?", session_id=session, backend="lf")

    sent = world.sent_to_langflow()["input_value"]
    assert "answer 3 " in sent  # the newest first
    assert "answer 2 " in sent
    assert "answer 0 " not in sent  # past the budget
    assert REVIEW not in sent


def test_an_unknown_session_is_not_found(world: World, tenant: Tenant) -> None:
    fails(tenant, NotFoundError, question=REVIEW, session_id="7c4e3a2b-1111-4222-8333-444455556666")
    fails(tenant, ValidationError, question=REVIEW, session_id="not-a-uuid")


def test_another_tenants_session_is_not_found(world: World, tenant: Tenant) -> None:
    other = Tenant.objects.create(name="Other", slug="other")
    theirs = ask(other, question=REVIEW)

    fails(tenant, NotFoundError, question=REVIEW, session_id=theirs["session_id"])


# --- fallback ------------------------------------------------------------------------


def test_a_failing_primary_falls_back_to_the_next(world: World, tenant: Tenant) -> None:
    world.fail(world.fw_route)

    body = ask(tenant, question=REVIEW)

    routing = body["routing"]
    assert body["answer"] == LF_ANSWER
    assert routing["fallback_used"] is True
    assert [(a["backend"], a["ok"]) for a in routing["fallback_chain"]] == [
        ("fw", False),
        ("lf", True),
    ]
    assert routing["fallback_chain"][0]["error_type"] == "UnexpectedError"
    decision = RoutingDecision.objects.get()
    assert (decision.outcome, decision.backend) == ("fallback", world.lf)
    records = PerformanceRecord.objects.order_by("id")
    assert [(r.backend.name, r.success) for r in records] == [("fw", False), ("lf", True)]


def test_a_failing_flow_falls_back_to_its_backends_generic_flow(
    world: World, tenant: Tenant
) -> None:
    """Issue 30: with one flow per backend among the candidates, a backend's generic flow
    was never tried when its flow for the intent failed, and the query failed."""
    world.set_health(world.fw, healthy=False, cooldown=True)
    world.lf_route.mock(
        side_effect=lambda request: (
            httpx.Response(500, json={"message": "boom"})
            if world.lf_flow.external_id in str(request.url)
            else response("langflow", "run_echo")
        )
    )

    body = ask(tenant, question=REVIEW)

    routing = body["routing"]
    assert body["answer"] == LF_ANSWER
    assert [(c["flow"], c["generic"]) for c in routing["candidates"]] == [
        ("echo", False),
        ("anything", True),
    ]
    assert [(a["backend"], a["flow"], a["ok"]) for a in routing["fallback_chain"]] == [
        ("lf", "echo", False),
        ("lf", "anything", True),
    ]
    assert (routing["backend"], routing["flow"]) == ("lf", "anything")


def test_an_answer_past_the_limit_falls_back_and_counts_against_its_backend(
    world: World, tenant: Tenant, settings: Any
) -> None:
    settings.MAX_ANSWER_BYTES = 10_000
    world.fw_route.mock(return_value=httpx.Response(200, json={"text": "x" * 20_000}))

    body = ask(tenant, question=REVIEW)

    assert body["answer"] == LF_ANSWER
    failed = body["routing"]["fallback_chain"][0]
    assert (failed["backend"], failed["ok"], failed["error_type"]) == (
        "fw",
        False,
        "UnexpectedError",
    )
    assert "'fw'" in failed["error"]
    assert "10000 bytes" in failed["error"]
    records = PerformanceRecord.objects.order_by("id")
    assert [(r.backend.name, r.success) for r in records] == [("fw", False), ("lf", True)]


def test_each_failed_attempt_is_one_log_line_naming_the_query(
    world: World, tenant: Tenant, caplog: pytest.LogCaptureFixture
) -> None:
    world.fail(world.fw_route)

    body = ask(tenant, question=REVIEW)

    lines = [r.getMessage() for r in caplog.records if r.name == "routing.answering.outcome"]
    assert lines == [
        f"Query {body['request_id']}: fw / reviewer failed (UnexpectedError): "
        + (body["routing"]["fallback_chain"][0]["error"])
    ]
    assert "sk-FW-SECRET" not in caplog.text


def test_an_exhausted_chain_is_an_error_carrying_the_chain(world: World, tenant: Tenant) -> None:
    world.fail(world.fw_route)
    world.fail(world.lf_route, 503)

    error = fails(tenant, AllBackendsFailedError, question=REVIEW)

    assert [(a["backend"], a["flow"]) for a in error.details["fallback_chain"]] == [
        ("fw", "reviewer"),
        ("lf", "echo"),
        ("lf", "anything"),  # lf's generic flow fails on the same route
    ]
    decision = RoutingDecision.objects.get()
    assert (decision.outcome, len(decision.fallback_chain)) == ("failed", 3)
    # The decision (its trace, /v/<id>/) says the error the caller got; each attempt's
    # own error is in its chain.
    assert (decision.error_type, decision.error_message) == ("AllBackendsFailed", error.message)
    assert [a["error_type"] for a in read(decision).fallback_chain] == ["UnexpectedError"] * 3
    assert PerformanceRecord.objects.filter(success=False).count() == 3


def test_all_down_serves_a_fresh_cached_answer_flagged(world: World, tenant: Tenant) -> None:
    ask(tenant, question=REVIEW)
    world.fail(world.fw_route)
    world.fail(world.lf_route)

    body = ask(tenant, question=REVIEW)

    assert body["answer"] == FW_ANSWER
    assert body["routing"]["cached"] is True
    assert body["routing"]["cached_from"]["backend"] == "fw"
    assert RoutingDecision.objects.latest("id").outcome == "cached"


def test_an_answer_longer_than_is_kept_is_not_served_from_the_cache(
    world: World, tenant: Tenant, settings: Any
) -> None:
    settings.MAX_STORED_ANSWER_CHARS = 1_000
    world.fw_route.mock(return_value=httpx.Response(200, json={"text": "long " * 400}))
    ask(tenant, question=REVIEW)
    world.fail(world.fw_route)
    world.fail(world.lf_route)

    # A cut answer must not stand in for the whole one: nothing cached, so an error.
    fails(tenant, AllBackendsFailedError, question=REVIEW)


# --- hedging -----------------------------------------------------------------------------


def _hedging(on: bool = True) -> None:
    policy = routing_policy_get()
    policy.hedging = on
    policy.save()
    refresh()


def _measured_fast(world: World, tenant: Tenant, answers: int = 8) -> None:
    """fw answers at once a few times: its usual latency is now milliseconds."""
    for _ in range(answers):
        assert ask(tenant, question=REVIEW)["routing"]["backend"] == "fw"


def _slow(route: Any, seconds: float, name: str, ended: dict[str, str]) -> None:
    """``route`` gives its usual answer after ``seconds``; ``ended[name]`` says how its
    call ended."""
    answer = route.return_value

    async def slow(request: httpx.Request) -> httpx.Response:
        try:
            await asyncio.sleep(seconds)
        except asyncio.CancelledError:
            ended[name] = "cancelled"
            raise
        ended[name] = "answered"
        return answer

    route.mock(side_effect=slow)


def test_a_hedge_starts_the_next_backend_past_the_usual_latency_and_the_first_answer_wins(
    world: World, tenant: Tenant
) -> None:
    _hedging()
    _measured_fast(world, tenant)
    PerformanceRecord.objects.all().delete()
    RoutingDecision.objects.all().delete()
    ended: dict[str, str] = {}
    _slow(world.fw_route, 5, "fw", ended)

    body = ask(tenant, question=REVIEW)

    assert body["answer"] == LF_ANSWER  # lf answered while fw was still at it
    chain = body["routing"]["fallback_chain"]
    assert [(a["backend"], a["ok"], a["error_type"]) for a in chain] == [
        ("fw", False, "Cancelled"),
        ("lf", True, ""),
    ]
    assert "hedged" not in chain[0]
    assert chain[1]["hedged"] is True
    assert ended == {"fw": "cancelled"}  # the loser's call was stopped, not left
    decision = RoutingDecision.objects.get()
    assert [a["error_type"] for a in read(decision).fallback_chain] == ["Cancelled", ""]
    assert (decision.outcome, decision.backend) == ("fallback", world.lf)
    # Stopped, fw did not fail: only lf's answer is measured.
    assert [r.backend.name for r in PerformanceRecord.objects.all()] == ["lf"]


def test_when_the_first_answers_first_the_hedge_is_cancelled(world: World, tenant: Tenant) -> None:
    _hedging()
    _measured_fast(world, tenant)
    ended: dict[str, str] = {}
    _slow(world.fw_route, 0.4, "fw", ended)
    _slow(world.lf_route, 5, "lf", ended)

    body = ask(tenant, question=REVIEW)

    assert body["answer"] == FW_ANSWER
    chain = body["routing"]["fallback_chain"]
    assert [(a["backend"], a["ok"], a.get("hedged", False)) for a in chain] == [
        ("fw", True, False),
        ("lf", False, True),
    ]
    assert chain[1]["error_type"] == "Cancelled"
    assert ended == {"fw": "answered", "lf": "cancelled"}
    assert RoutingDecision.objects.latest("created_at").outcome == "success"


def test_without_hedging_a_slow_first_backend_is_waited_for(world: World, tenant: Tenant) -> None:
    _measured_fast(world, tenant)
    ended: dict[str, str] = {}
    _slow(world.fw_route, 0.4, "fw", ended)
    calls = world.lf_route.call_count

    body = ask(tenant, question=REVIEW)

    assert body["answer"] == FW_ANSWER
    assert [a["backend"] for a in body["routing"]["fallback_chain"]] == ["fw"]
    assert world.lf_route.call_count == calls


def test_a_hedged_first_that_fails_leaves_the_hedge_to_answer(world: World, tenant: Tenant) -> None:
    _hedging()
    _measured_fast(world, tenant)

    async def slow_failure(request: httpx.Request) -> httpx.Response:
        await asyncio.sleep(0.5)
        return httpx.Response(500, json={"message": "boom"})

    world.fw_route.mock(side_effect=slow_failure)
    ended: dict[str, str] = {}
    _slow(world.lf_route, 1.0, "lf", ended)

    body = ask(tenant, question=REVIEW)

    assert body["answer"] == LF_ANSWER
    chain = body["routing"]["fallback_chain"]
    # Once fw failed, echo ran alone past its usual latency: lf's generic flow, next, was
    # hedged beside it, and stopped when echo answered.
    assert [(a["backend"], a["flow"], a["error_type"]) for a in chain] == [
        ("fw", "reviewer", "UnexpectedError"),
        ("lf", "echo", ""),
        ("lf", "anything", "Cancelled"),
    ]
    assert chain[1]["hedged"] is True  # started while fw still ran
    assert ended == {"lf": "cancelled"}  # the last lf call to end: the generic flow's


# --- metadata and decisions ------------------------------------------------------------


def test_routing_metadata_can_be_left_out(world: World, tenant: Tenant) -> None:
    body = ask(tenant, question=REVIEW, include_routing_metadata=False)

    assert "routing" not in body
    assert body["answer"] == FW_ANSWER


def test_every_query_writes_exactly_one_decision(world: World, tenant: Tenant) -> None:
    ask(tenant, question=REVIEW)  # success
    world.fail(world.fw_route)
    ask(tenant, question="refactor this please")  # fallback
    world.fail(world.lf_route)
    fails(tenant, AllBackendsFailedError, question="review my code diff")  # failure
    fails(tenant, ValidationError, question=REVIEW, backend="nope")  # bad backend

    outcomes = list(RoutingDecision.objects.order_by("id").values_list("outcome", flat=True))
    assert outcomes == ["success", "fallback", "failed", "rejected"]
    decision = RoutingDecision.objects.earliest("id")
    assert decision.candidates
    assert decision.total_ms >= decision.execute_ms > 0


# --- conversation intents ------------------------------------------------------------------


def test_summarize_sends_the_last_three_answers(world: World, tenant: Tenant) -> None:
    answers = iter(["answer one", "answer two", "answer three", "answer four", "a summary"])
    world.fw_route.mock(
        side_effect=lambda request: httpx.Response(200, json={"text": next(answers)})
    )
    session = ask(tenant, question=REVIEW)["session_id"]
    for _ in range(3):
        ask(tenant, question=REVIEW, session_id=session)

    body = ask(tenant, question="summarize this conversation in bullet points", session_id=session)

    sent = world.sent_to_flowise()["question"]
    assert body["routing"]["intent"] == "summarize"
    assert body["answer"] == "a summary"
    assert "answer one" not in sent
    assert all(a in sent for a in ("answer two", "answer three", "answer four"))
    assert "in bullet points" in sent  # how the user wants it


def test_summarize_sends_the_newest_answers_within_the_budget(
    world: World, tenant: Tenant, settings: Any
) -> None:
    settings.HISTORY_BUDGET_CHARS = 300
    answers = iter(["one " + "a" * 200, "two " + "b" * 200, "three " + "c" * 200, "a summary"])
    world.fw_route.mock(
        side_effect=lambda request: httpx.Response(200, json={"text": next(answers)})
    )
    session = ask(tenant, question=REVIEW)["session_id"]
    for _ in range(2):
        ask(tenant, question=REVIEW, session_id=session)

    ask(tenant, question="summarize this conversation", session_id=session)

    sent = world.sent_to_flowise()["question"]
    assert "three " + "c" * 200 in sent  # the newest, whole
    assert "one " not in sent
    assert len(sent) < 300 + 300  # the budget, and the request's own words around it


def test_summarize_without_answers_is_a_clear_error(world: World, tenant: Tenant) -> None:
    error = fails(tenant, ValidationError, question="summarize this conversation")

    assert "nothing to summarize" in error.message


def test_a_one_shot_summary_of_content_goes_to_a_flow_as_written(
    world: World, tenant: Tenant
) -> None:
    body = ask(tenant, question="Please summarize this thread", intent="summarize")

    assert body["routing"]["backend"] == "fw"  # answered, not refused
    sent = world.sent_to_flowise()["question"]
    assert sent == "Please summarize this thread"


def test_a_summary_of_a_pasted_text_mid_conversation_is_of_the_text(
    world: World, tenant: Tenant
) -> None:
    session = ask(tenant, question=REVIEW)["session_id"]
    article = "Summarize this article in three bullet points: glaciers are retreating fast."

    body = ask(tenant, question=article, session_id=session, intent="summarize")

    assert body["answer"] == FW_ANSWER
    assert world.sent_to_flowise()["question"] == article  # not the conversation's answers


def test_questions_about_the_conversation_are_answered_from_history(
    world: World, tenant: Tenant
) -> None:
    session = ask(tenant, question=REVIEW)["session_id"]
    calls = world.fw_route.call_count

    body = ask(tenant, question="what did I ask first?", session_id=session)

    assert body["routing"]["intent"] == "conversation-query"
    assert body["answer"] == f"Your first question was: {REVIEW}"
    assert world.fw_route.call_count == calls
    assert RoutingDecision.objects.latest("id").backend is None


def test_a_question_about_a_numbered_turn_finds_it(world: World, tenant: Tenant) -> None:
    answers = iter(["one", "two", "three", "four"])
    world.fw_route.mock(
        side_effect=lambda request: httpx.Response(200, json={"text": next(answers)})
    )
    session = ask(tenant, question=REVIEW)["session_id"]
    ask(tenant, question="and refactor the parser too", session_id=session)

    second = ask(tenant, question="what was my second question?", session_id=session)
    answer = ask(tenant, question="what was your second answer?", session_id=session)
    beyond = ask(tenant, question="and my fifth question?", session_id=session)

    assert second["answer"] == "Your second question was: and refactor the parser too"
    assert answer["answer"] == "My second answer was: two"
    turns = [PastTurn(REVIEW, "one", "code-review", None), PastTurn("q2", "two", "general", None)]
    assert answer_from_history("and the 2nd question?", turns) == "Your 2nd question was: q2"
    assert "only" in beyond["answer"]


@override_settings(LLM_BASE_URL="http://llm.test/v1", LLM_API_KEY="sk-LLM-SECRET")
def test_with_an_llm_questions_about_the_conversation_are_answered_from_its_transcript(
    world: World, tenant: Tenant
) -> None:
    llm_route = world.router.post("http://llm.test/v1/chat/completions").mock(
        return_value=httpx.Response(
            200, json={"choices": [{"message": {"content": "You asked me to review a PR."}}]}
        )
    )
    session = ask(tenant, question=REVIEW)["session_id"]

    body = ask(tenant, question="what did we talk about so far?", session_id=session)

    assert body["routing"]["intent"] == "conversation-query"
    assert body["answer"] == "You asked me to review a PR."
    sent = json.loads(llm_route.calls.last.request.content)["messages"][1]["content"]
    assert f"User: {REVIEW}" in sent
    assert f"Assistant: {FW_ANSWER}" in sent


@override_settings(LLM_BASE_URL="http://llm.test/v1")
def test_an_llm_that_fails_leaves_the_conversation_question_to_the_rules(
    world: World, tenant: Tenant
) -> None:
    world.router.post("http://llm.test/v1/chat/completions").mock(
        side_effect=httpx.ConnectError("refused")
    )
    session = ask(tenant, question=REVIEW)["session_id"]

    body = ask(tenant, question="what did I ask first?", session_id=session)

    assert body["answer"] == f"Your first question was: {REVIEW}"


# --- streaming and disconnects ----------------------------------------------------------


def _collect(tenant: Tenant, **fields: Any) -> list[dict[str, Any]]:
    async def run() -> list[dict[str, Any]]:
        return [e async for e in stream_answer(query_request(fields), tenant=tenant)]

    try:
        return async_to_sync(run)()
    finally:
        drain()


def test_streaming_sends_chunks_then_the_routing_block(world: World, tenant: Tenant) -> None:
    from tests.captured import response

    world.fw_route.mock(return_value=response("flowise", "prediction_agentflow_stream"))

    events = _collect(tenant, question=REVIEW, parameters={"stream": True})

    assert [e["event"] for e in events] == ["chunk", "end"]
    assert events[0]["text"] == events[1]["answer"]
    assert events[1]["routing"]["backend"] == "fw"
    assert world.sent_to_flowise()["streaming"] is True
    assert RoutingDecision.objects.get().outcome == "success"


def test_a_streamed_failure_ends_with_an_error_event(world: World, tenant: Tenant) -> None:
    world.fail(world.fw_route)
    world.fail(world.lf_route)

    events = _collect(tenant, question=REVIEW, parameters={"stream": True})

    assert events[-1]["event"] == "error"
    assert events[-1]["error"]["type"] == "AllBackendsFailed"
    assert RoutingDecision.objects.get().outcome == "failed"


def _answers_slowly(world: World, text: str) -> None:
    async def slow(request: httpx.Request) -> httpx.Response:
        await asyncio.sleep(0.3)
        return httpx.Response(200, json={"text": text})

    world.fw_route.mock(side_effect=slow)


async def _ask_and_leave(tenant: Tenant) -> None:
    """Ask in a conversation (whose turns keep the answers), then go away before the
    answer comes."""
    session = await Session.objects.acreate(tenant=tenant)
    asked = query_request({"question": REVIEW, "session_id": str(session.pk)})
    task = asyncio.ensure_future(answer_question(asked, tenant=tenant))
    await asyncio.sleep(0.1)
    task.cancel()  # what Django does to a view whose client disconnects
    with pytest.raises(asyncio.CancelledError):
        await task


def test_a_client_that_goes_away_loses_nothing_and_is_recorded_as_gone(
    world: World, tenant: Tenant
) -> None:
    _answers_slowly(world, "late but complete")

    async def disconnect() -> None:
        await _ask_and_leave(tenant)
        for _ in range(50):
            if await RoutingDecision.objects.filter(outcome="success").aexists():
                return
            await asyncio.sleep(0.05)

    async_to_sync(disconnect)()

    decision = RoutingDecision.objects.get()
    assert decision.outcome == "abandoned"  # what the client got: nothing
    assert decision.evidence["answered_as"] == "success"  # what routing achieved
    assert decision.backend == world.fw
    assert PerformanceRecord.objects.get().success  # the backend did answer
    assert Turn.objects.get().answer == "late but complete"


def test_a_shutdown_waits_for_answers_whose_clients_left(world: World, tenant: Tenant) -> None:
    _answers_slowly(world, "finished during shutdown")

    async def disconnect_then_shut_down() -> None:
        await _ask_and_leave(tenant)
        await answers_finish()

    async_to_sync(disconnect_then_shut_down)()
    drain()

    assert RoutingDecision.objects.get().outcome == "abandoned"
    assert Turn.objects.get().answer == "finished during shutdown"


def test_an_answer_the_shutdown_cuts_off_is_recorded_as_cancelled(
    world: World, tenant: Tenant
) -> None:
    _hangs(world.fw_route)

    async def shut_down_too_soon() -> None:
        asking = asyncio.ensure_future(
            answer_question(query_request({"question": REVIEW}), tenant=tenant)
        )
        await asyncio.sleep(0.2)
        await answers_finish(timeout=0.1)  # the shutdown's wait runs out ...
        for task in asyncio.all_tasks() - {asyncio.current_task()}:
            task.cancel()  # ... and the loop's end cancels what is left, as asyncio.run does
        with pytest.raises(asyncio.CancelledError):
            await asking

    async_to_sync(shut_down_too_soon)()
    drain()

    decision = RoutingDecision.objects.get()
    assert (decision.outcome, decision.error_type) == ("failed", "Cancelled")
    assert decision.error_message == "The server stopped before the answer was complete."


def test_a_stream_its_client_leaves_is_recorded_as_gone(world: World, tenant: Tenant) -> None:
    async def slow_stream(request: httpx.Request) -> httpx.Response:
        await asyncio.sleep(0.3)
        return response("flowise", "prediction_agentflow_stream")

    world.fw_route.mock(side_effect=slow_stream)

    async def leave_early() -> None:
        events = stream_answer(
            query_request({"question": REVIEW, "parameters": {"stream": True}}), tenant=tenant
        )
        waiting = asyncio.ensure_future(events.__anext__())
        await asyncio.sleep(0.1)
        waiting.cancel()  # the client goes before the first chunk
        with pytest.raises(asyncio.CancelledError):
            await waiting
        await events.aclose()
        await answers_finish()

    async_to_sync(leave_early)()
    drain()

    decision = RoutingDecision.objects.get()
    assert decision.outcome == "abandoned"
    assert decision.evidence["answered_as"] == "success"


def test_a_stream_cut_after_its_first_words_is_never_finished_by_another_answer(
    world: World, tenant: Tenant
) -> None:
    ask(tenant, question=REVIEW)  # a fresh cached answer to the same question exists
    captured_stream = captured("flowise", "prediction_agentflow_stream")["body"]
    head = captured_stream[: captured_stream.index('"event":"token"') + 60]  # past one token

    async def cut_off() -> AsyncIterator[bytes]:
        yield head.encode()
        raise httpx.ReadError("connection reset by peer")

    world.fw_route.mock(
        return_value=httpx.Response(
            200, headers={"content-type": "text/event-stream"}, stream=_Stream(cut_off())
        )
    )

    events = _collect(tenant, question=REVIEW, parameters={"stream": True})

    assert [e["event"] for e in events] == ["chunk", "error"]
    assert events[0]["text"] == "Echo: hello flowise"
    assert events[1]["error"]["type"] == "AllBackendsFailed"
    assert RoutingDecision.objects.latest("id").outcome == "failed"


class _Stream(httpx.AsyncByteStream):
    def __init__(self, chunks: AsyncIterator[bytes]) -> None:
        self._chunks = chunks

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self._chunks:
            yield chunk


# --- whatever happens, one decision ------------------------------------------------------


def test_an_unknown_session_is_refused_and_recorded_a_malformed_one_refused_at_the_door(
    world: World, tenant: Tenant
) -> None:
    fails(tenant, NotFoundError, question=REVIEW, session_id="7c4e3a2b-1111-4222-8333-444455556666")
    with pytest.raises(ValidationError):  # like every field refused by query_request
        query_request({"question": REVIEW, "session_id": "not-a-uuid"})

    decision = RoutingDecision.objects.get()
    assert (decision.outcome, decision.error_type) == ("rejected", "NotFoundError")
    assert decision.session_id is None
    assert not world.fw_route.called


def _broken_planning(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*args: Any, **kwargs: Any) -> None:
        raise KeyError("a bug, not a backend error")

    monkeypatch.setattr("routing.answering.preparation.plan", broken)


def test_a_bug_inside_flywheel_is_recorded_as_a_failure(
    world: World, tenant: Tenant, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    _broken_planning(monkeypatch)

    with pytest.raises(KeyError):
        ask(tenant, question=REVIEW)

    decision = RoutingDecision.objects.get()
    assert (decision.outcome, decision.error_type) == ("failed", "InternalError")
    assert "failed inside Flywheel" in caplog.text
    assert not world.fw_route.called


def test_a_bug_inside_flywheel_ends_a_stream_with_an_error_event(
    world: World, tenant: Tenant, monkeypatch: pytest.MonkeyPatch
) -> None:
    _broken_planning(monkeypatch)

    events = _collect(tenant, question=REVIEW, parameters={"stream": True})

    assert [e["event"] for e in events] == ["error"]
    assert events[0]["error"]["type"] == "InternalError"
    assert "bug" not in json.dumps(events)  # the details stay in the log
    assert RoutingDecision.objects.get().error_type == "InternalError"


def _broken_flowise(monkeypatch: pytest.MonkeyPatch, method: str) -> None:
    from backends.adapters.flowise import FlowiseBackend

    def broken(*args: Any, **kwargs: Any) -> None:
        raise KeyError("a bug in one adapter, not a backend error")

    monkeypatch.setattr(FlowiseBackend, method, broken)


def test_an_attempt_failing_inside_flywheel_falls_back_to_the_next_candidate(
    world: World, tenant: Tenant, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    _broken_flowise(monkeypatch, "execute_flow")

    body = ask(tenant, question=REVIEW)

    assert body["answer"] == LF_ANSWER
    chain = body["routing"]["fallback_chain"]
    assert [(a["backend"], a["ok"], a["error_type"]) for a in chain] == [
        ("fw", False, "ClientError"),
        ("lf", True, ""),
    ]
    assert "bug" not in json.dumps(body)  # the details stay in the log
    assert "Attempt on backend fw (flow reviewer) failed inside Flywheel" in caplog.text
    decision = RoutingDecision.objects.get()
    assert (decision.outcome, decision.backend) == ("fallback", world.lf)
    records = PerformanceRecord.objects.order_by("id")
    assert [(r.backend.name, r.success, r.error_type) for r in records] == [
        ("fw", False, "ClientError"),
        ("lf", True, ""),
    ]


def test_a_stream_failing_inside_flywheel_before_its_first_words_falls_back(
    world: World, tenant: Tenant, monkeypatch: pytest.MonkeyPatch
) -> None:
    _broken_flowise(monkeypatch, "stream_flow")
    world.lf_route.mock(return_value=response("langflow", "run_stream"))

    events = _collect(tenant, question=REVIEW, parameters={"stream": True})

    assert [e["event"] for e in events][-1] == "end"
    end = events[-1]
    assert [(a["backend"], a["error_type"]) for a in end["routing"]["fallback_chain"]] == [
        ("fw", "ClientError"),
        ("lf", ""),
    ]
    assert RoutingDecision.objects.get().outcome == "fallback"


def test_a_stream_failing_inside_flywheel_after_its_first_words_ends_with_an_error(
    world: World, tenant: Tenant
) -> None:
    captured_stream = captured("flowise", "prediction_agentflow_stream")["body"]
    head = captured_stream[: captured_stream.index('"event":"token"') + 60]  # past one token

    async def broken() -> AsyncIterator[bytes]:
        yield head.encode()
        raise KeyError("not a network error: nothing the adapter expects")

    world.fw_route.mock(
        return_value=httpx.Response(
            200, headers={"content-type": "text/event-stream"}, stream=_Stream(broken())
        )
    )

    events = _collect(tenant, question=REVIEW, parameters={"stream": True})

    assert [e["event"] for e in events] == ["chunk", "error"]  # never another backend's words
    assert events[1]["error"]["type"] == "AllBackendsFailed"
    assert not world.lf_route.called
    decision = RoutingDecision.objects.get()
    # The decision keeps the error the caller got; the attempt's own is in its chain.
    assert (decision.outcome, decision.error_type) == ("failed", "AllBackendsFailed")
    assert [a["error_type"] for a in read(decision).fallback_chain] == ["ClientError"]


def test_a_backend_deleted_since_the_plan_was_made_is_an_attempt_that_failed(
    world: World, tenant: Tenant
) -> None:
    from routing.answering.execution import forget_configs, run_chain
    from routing.selection.planning import plan
    from routing.selection.state import current_state, now

    state = async_to_sync(current_state)()
    candidates = plan(
        state,
        tenant_id=tenant.pk,
        intent="code-review",
        global_weight=None,
        preference="auto",
        now=now(),
    ).candidates
    Backend.objects.filter(pk=world.fw.pk).delete()  # between the plan and the run
    forget_configs()

    chain = async_to_sync(run_chain)(
        candidates,
        REVIEW,
        intent="code-review",
        policy=state.policy,
        session_id="s",
        parameters={},
        history_for=lambda c: (),
    )

    assert [(a.backend, a.ok, a.error_type) for a in chain.attempts] == [
        ("fw", False, "NotFoundError"),
        ("lf", True, ""),
    ]
    assert chain.result is not None
    assert chain.result.text == LF_ANSWER
    assert not world.fw_route.called


def _hangs(route: Any) -> None:
    async def hang(request: httpx.Request) -> httpx.Response:
        await asyncio.sleep(5)
        return httpx.Response(200, json={"text": "too late"})

    route.mock(side_effect=hang)


def _two_candidates(world: World) -> None:
    """fw's flow and lf's alone share the budget: lf's generic flow, a third behind them,
    would start or not by how much of it a loaded machine left."""
    world.generic.delete()
    refresh()


def _budget(seconds: float) -> None:
    policy = routing_policy_get()
    policy.query_budget_seconds = seconds
    policy.save()
    refresh()


def test_a_hung_backend_is_cut_at_its_deadline_and_leaves_the_fallback_time_to_answer(
    world: World, tenant: Tenant
) -> None:
    _hangs(world.fw_route)  # as one that sends a byte now and then: its idle timer never fires
    _budget(1.0)
    started = time.perf_counter()

    body = ask(tenant, question=REVIEW)

    assert time.perf_counter() - started < 2  # the backend's own timeout is 60 s
    # Before, fw took the whole budget (BudgetExceeded, unmeasured) and lf was never tried.
    assert body["answer"] == LF_ANSWER
    chain = body["routing"]["fallback_chain"]
    assert [(a["backend"], a["error_type"]) for a in chain] == [("fw", "TimeoutError"), ("lf", "")]
    # Half of what remained of the budget when fw started (what came before took a little).
    cut = re.search(r"attempt's deadline \((\d+\.\d) s\)", chain[0]["error"])
    assert cut is not None, chain[0]["error"]
    assert 0.3 <= float(cut[1]) <= 0.5
    fw = PerformanceRecord.objects.get(backend=world.fw)
    assert (fw.success, fw.error_type) == (False, "TimeoutError")  # measured: the breaker sees it


def test_hung_backends_cost_no_more_than_the_query_budget(world: World, tenant: Tenant) -> None:
    _two_candidates(world)
    _hangs(world.fw_route)
    _hangs(world.lf_route)
    _budget(0.4)
    started = time.perf_counter()

    error = fails(tenant, AllBackendsFailedError, question=REVIEW)

    assert time.perf_counter() - started < 2  # the backends' own timeouts are 60 s
    chain = error.details["fallback_chain"]
    assert [(a["backend"], a["error_type"]) for a in chain] == [
        ("fw", "TimeoutError"),
        ("lf", "BudgetExceeded"),
    ]
    assert "time budget" in chain[1]["error"]
    assert error.message.endswith("within the query's time budget of 0.4 s.")
    # lf was cut by the budget, with what fw left it: that says nothing of lf.
    assert list(PerformanceRecord.objects.values_list("backend__name", flat=True)) == ["fw"]


def test_a_later_attempt_gets_only_what_remains_of_the_budget(world: World, tenant: Tenant) -> None:
    _two_candidates(world)

    async def slow_failure(request: httpx.Request) -> httpx.Response:
        await asyncio.sleep(0.3)
        return httpx.Response(500, json={"message": "boom"})

    world.fw_route.mock(side_effect=slow_failure)
    _hangs(world.lf_route)
    # fw's deadline is half of what remains when it starts: the budget leaves it room
    # for its 0.3 s even when a loaded machine spends a second before the first attempt.
    _budget(2.0)
    started = time.perf_counter()

    error = fails(tenant, AllBackendsFailedError, question=REVIEW)

    assert time.perf_counter() - started < 3.5
    chain = error.details["fallback_chain"]
    assert [(a["backend"], a["error_type"]) for a in chain] == [
        ("fw", "UnexpectedError"),
        ("lf", "BudgetExceeded"),
    ]
    assert chain[1]["latency_ms"] < 1800  # the 2 s budget less fw's 0.3 s, not 2 s


def test_a_streamed_answer_keeps_to_the_budget_too(world: World, tenant: Tenant) -> None:
    _two_candidates(world)
    _hangs(world.fw_route)
    _hangs(world.lf_route)
    _budget(1.0)  # room for a loaded machine's preparation, so fw starts within it
    started = time.perf_counter()

    events = _collect(tenant, question=REVIEW, parameters={"stream": True})

    assert time.perf_counter() - started < 3  # the backends' own timeouts are 60 s
    assert events[-1]["event"] == "error"
    chain = events[-1]["error"]["details"]["fallback_chain"]
    assert [(a["backend"], a["error_type"]) for a in chain] == [
        ("fw", "TimeoutError"),
        ("lf", "BudgetExceeded"),
    ]


def test_a_stream_that_does_not_start_in_time_falls_back(world: World, tenant: Tenant) -> None:
    _hangs(world.fw_route)
    world.lf_route.mock(return_value=response("langflow", "run_stream"))
    _budget(1.0)

    events = _collect(tenant, question=REVIEW, parameters={"stream": True})

    assert events[-1]["event"] == "end", events[-1]
    chain = events[-1]["routing"]["fallback_chain"]
    assert [(a["backend"], a["error_type"]) for a in chain] == [("fw", "TimeoutError"), ("lf", "")]


def test_a_budget_spent_before_any_attempt_says_so(world: World, tenant: Tenant) -> None:
    RoutingPolicy.objects.update(query_budget_seconds=0.000_001)  # below the admin's minimum
    refresh()

    error = fails(tenant, AllBackendsFailedError, question=REVIEW)

    assert error.message.endswith("within the query's time budget of 1e-06 s.")
    assert error.details["fallback_chain"] == []
    decision = RoutingDecision.objects.get()
    assert (decision.error_type, decision.error_message) == ("AllBackendsFailed", error.message)
    assert not world.fw_route.called


def test_a_demoted_backend_is_tried_again_once_its_failures_age(
    world: World, tenant: Tenant
) -> None:
    world.fail(world.fw_route)
    ask(tenant, question=REVIEW)  # fw fails: lf answers, and fw now ranks second
    assert ask(tenant, question=REVIEW)["routing"]["backend"] == "lf"
    world.fw_route.mock(return_value=httpx.Response(200, json={"text": "fw is back"}))
    # A quiet ten minutes: twenty half-lives, past the seven within which attempts count.
    PerformanceRecord.objects.update(created_at=timezone.now() - timedelta(minutes=10))
    learning.book.forget()  # this process's own attempts are as old
    evidence_publish_all(window=100)  # as beat, or the next batch, would
    refresh()

    routing = ask(tenant, question=REVIEW)["routing"]

    assert routing["backend"] == "fw"  # its failure says nothing now: the tie goes to fw
    candidates = routing["candidates"]
    assert [(c["backend"], c["flow"]) for c in candidates] == [
        ("fw", "reviewer"),
        ("lf", "echo"),
        ("lf", "anything"),
    ]
    assert [c["performance"] for c in candidates] == [NO_HISTORY_PERFORMANCE] * 3  # the prior
    assert [c["attempts"] for c in candidates] == [0, 0, 0]


# --- token usage ----------------------------------------------------------------------------


def test_the_usage_a_backend_reports_is_kept_on_the_attempt_and_in_performance_memory(
    world: World, tenant: Tenant
) -> None:
    # Flowise 3.1.4's answer from an AGENTFLOW with an LLM node (captured): 5 + 3 tokens.
    world.fw_route.mock(return_value=response("flowise", "prediction_llm_usage"))

    ask(tenant, question=REVIEW, backend="fw")

    record = PerformanceRecord.objects.get()
    assert (record.prompt_tokens, record.completion_tokens, record.total_tokens) == (5, 3, 8)
    assert record.cost == pytest.approx(2.55e-06)  # Flowise prices the tokens itself
    from routing.selection import state

    state.forget()
    evidence = state.published_evidence([world.fw.pk])[(world.fw.pk, "code-review")]
    assert estimate(evidence[world.fw_flow.pk], Prior()).tokens == pytest.approx(8)


def test_a_streamed_answer_keeps_its_usage_too(world: World, tenant: Tenant) -> None:
    stream = (FIXTURES / "flowise" / "prediction_llm_usage_stream.txt").read_bytes()
    world.fw_route.mock(
        return_value=httpx.Response(
            200, content=stream, headers={"content-type": "text/event-stream"}
        )
    )

    events = _collect(tenant, question=REVIEW, backend="fw", parameters={"stream": True})

    assert events[-1]["event"] == "end"
    assert PerformanceRecord.objects.get().total_tokens == 8


def test_an_llm_free_flow_reports_no_usage_rather_than_zero(world: World, tenant: Tenant) -> None:
    ask(tenant, question=REVIEW, backend="fw")  # the captured echo agentflow

    assert PerformanceRecord.objects.get().total_tokens is None


# --- a conversation the caller keeps ------------------------------------------------------


def test_a_history_the_caller_keeps_goes_to_the_flow_and_steers_a_follow_up(
    world: World, tenant: Tenant
) -> None:
    """``history`` (OpenAI-style clients keep the conversation themselves): it travels
    to whichever flow answers, and a follow-up that names no intent keeps the
    conversation's, as with a session."""
    history = [{"question": "Please review my pull request", "answer": "Two nits."}]

    answered = ask(tenant, question="And the tests too?", history=history)

    assert answered["routing"]["intent"] == "code-review"
    assert answered["routing"]["method"] == "context"
    sent = world.sent_to_flowise() if answered["routing"]["backend"] == "fw" else None
    if sent is None:
        sent = world.sent_to_langflow()
        assert "Two nits." in json.dumps(sent)
    else:
        assert sent["history"] == [
            {"role": "userMessage", "content": "Please review my pull request"},
            {"role": "apiMessage", "content": "Two nits."},
        ]
    # One-shot: the caller keeps the conversation, and Flywheel no copy of it.
    assert not Turn.objects.exists()
    assert RoutingDecision.objects.get(request_id=answered["request_id"]).session_id is None


def test_a_history_with_a_session_is_refused_as_either_or(world: World, tenant: Tenant) -> None:
    session = ask(tenant, question=REVIEW)["session_id"]

    refused = fails(
        tenant,
        ValidationError,
        question="And the tests?",
        session_id=session,
        history=[{"question": "q", "answer": "a"}],
    )

    assert "Not with session_id" in refused.details["fields"]["history"]

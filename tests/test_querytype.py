"""Seed 004 query-type routing: acceptance criteria 1-3, 8-10, and its endpoints."""

from __future__ import annotations

import httpx
import pytest
import respx
from django.test import override_settings
from rest_framework.test import APIClient

from routing.llm import parse_query_type
from routing.querytype import GLOBAL, HYBRID, LOCAL, below_threshold, classify_query_type
from routing.rules import intent_rules
from routing.services import defaults_load

pytestmark = pytest.mark.django_db(transaction=True)

ENABLED = override_settings(QUERY_ROUTING_ENABLED=True)


@pytest.fixture(autouse=True)
def _defaults(db) -> None:
    defaults_load()


def _decide(question: str):
    return below_threshold(classify_query_type(intent_rules(), question), 0.7)


@pytest.mark.parametrize(
    "question",
    [
        "What are the main themes?",
        "Give me an overview of the recurring topics across all the interviews",
        "What are the key trends across the whole dataset?",
    ],
)
def test_ac1_abstract_questions_are_global(question: str) -> None:
    decision = _decide(question)

    assert decision.query_type == GLOBAL
    assert decision.confidence >= 0.7
    assert (decision.global_weight, decision.local_weight) == (1.0, 0.0)


@pytest.mark.parametrize(
    "question",
    [
        "What is function X?",
        "Who is the author of the billing module?",
        "When did the outage start?",
    ],
)
def test_ac2_specific_questions_are_local(question: str) -> None:
    decision = _decide(question)

    assert decision.query_type == LOCAL
    assert decision.confidence >= 0.7


def test_ac3_a_question_with_both_signals_is_hybrid_and_weighted() -> None:
    decision = _decide("What are the main themes, and who is the author of chapter 3?")

    assert decision.query_type == HYBRID
    assert decision.global_weight + decision.local_weight == pytest.approx(1.0)
    assert 0 < decision.global_weight < 1


def test_ac9_decisions_carry_confidence_and_reasoning() -> None:
    decision = _decide("What are the main themes?")

    assert decision.reasoning
    assert decision.evidence["global"]


def test_ac10_below_the_threshold_hybrid_is_used() -> None:
    unsure = _decide("hello there")

    assert unsure.query_type == HYBRID
    assert unsure.confidence < 0.7
    assert (unsure.global_weight, unsure.local_weight) == (0.5, 0.5)


def test_llm_answers_are_parsed_strictly() -> None:
    assert parse_query_type("TYPE: LOCAL\nCONFIDENCE: 0.9\nREASONING: a named entity") == (
        "LOCAL",
        0.9,
        "a named entity",
    )
    assert parse_query_type("TYPE: ADMIN\nCONFIDENCE: 0.9\nREASONING: x") is None
    assert parse_query_type("TYPE: LOCAL\nCONFIDENCE: 7\nREASONING: x") is None
    assert parse_query_type("sure! it's GLOBAL") is None


def test_status_answers_when_disabled(api_client: APIClient) -> None:
    status = api_client.get("/api/v1/query-router/status")

    assert status.status_code == 200
    assert status.json()["enabled"] is False
    assert status.json()["patterns"]["global"] > 0


def test_route_and_patterns_are_not_found_when_disabled(api_client: APIClient) -> None:
    routed = api_client.post("/api/v1/query-router/route", {"query": "x"}, format="json")
    patterns = api_client.get("/api/v1/query-router/patterns")

    assert routed.status_code == patterns.status_code == 404
    assert "QUERY_ROUTING_ENABLED" in routed.json()["error"]["message"]


@ENABLED
def test_route_endpoint_classifies_for_the_keys_tenant(api_client: APIClient) -> None:
    routed = api_client.post(
        "/api/v1/query-router/route",
        {"query": "What are the main themes?", "tenant_id": "someone-else"},
        format="json",
    )

    assert routed.status_code == 400  # unknown fields are refused, never trusted


@ENABLED
def test_route_endpoint_answers_with_the_decision(api_client: APIClient) -> None:
    routed = api_client.post(
        "/api/v1/query-router/route", {"query": "What are the main themes?"}, format="json"
    )

    body = routed.json()
    assert routed.status_code == 200, body
    assert (body["query_type"], body["tenant"]) == ("GLOBAL", "acme")
    assert body["confidence"] >= 0.7
    assert body["reasoning"]


@ENABLED
def test_patterns_endpoint_lists_both_scopes(api_client: APIClient) -> None:
    body = api_client.get("/api/v1/query-router/patterns").json()

    assert body["global"]
    assert body["local"]


@ENABLED
@respx.mock
@override_settings(LLM_BASE_URL="http://llm.test/v1", LLM_API_KEY="sk-x")
def test_the_llm_settles_an_unsure_query(api_client: APIClient) -> None:
    from routing.models import RoutingPolicy

    RoutingPolicy.objects.update(llm_classification_enabled=True)
    respx.post("http://llm.test/v1/chat/completions").mock(
        return_value=httpx.Response(
            200,
            json={
                "choices": [
                    {"message": {"content": "TYPE: LOCAL\nCONFIDENCE: 0.85\nREASONING: one person"}}
                ]
            },
        )
    )

    body = api_client.post(
        "/api/v1/query-router/route", {"query": "tell me about Ada"}, format="json"
    ).json()

    assert (body["query_type"], body["method"], body["confidence"]) == ("LOCAL", "llm", 0.85)


@ENABLED
@respx.mock
@override_settings(LLM_BASE_URL="http://llm.test/v1", LLM_API_KEY="sk-x")
def test_ac6_the_llm_gets_at_most_500_ms_then_hybrid_stands(api_client: APIClient) -> None:
    from routing.models import RoutingPolicy

    RoutingPolicy.objects.update(llm_classification_enabled=True)
    route = respx.post("http://llm.test/v1/chat/completions").mock(
        side_effect=httpx.ReadTimeout("too slow")
    )

    body = api_client.post(
        "/api/v1/query-router/route", {"query": "tell me about Ada"}, format="json"
    ).json()

    assert route.calls.last.request.extensions["timeout"]["read"] == 0.5
    assert body["query_type"] == "HYBRID"

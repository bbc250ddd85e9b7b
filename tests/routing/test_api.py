"""REST and CLI doors onto the universal query."""

from __future__ import annotations

import json
import logging
import re
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.core.management import CommandError, call_command
from django.test import override_settings
from rest_framework.test import APIClient

from chatflows.models import Flow
from flywheel.links import public_url, served_at
from flywheel.models import Tenant
from flywheel.services import api_key_create
from routing.models import RoutingDecision
from routing.recording.writer import drain
from tests.captured import response
from tests.routing_world import FW_ANSWER, World, refresh

pytestmark = pytest.mark.django_db(transaction=True)

REVIEW = "Please review my pull request"


def test_a_question_is_answered_with_an_absolute_trace_url(
    world: World, api_client: APIClient
) -> None:
    result = api_client.post("/api/v1/query", {"question": REVIEW}, format="json")

    body = result.json()
    assert result.status_code == 200, body
    assert body["answer"] == FW_ANSWER
    assert body["trace_url"] == f"http://testserver/decisions/{body['request_id']}"
    assert "SECRET" not in result.content.decode()


@pytest.mark.parametrize(
    ("payload", "field"),
    [
        ({}, "question"),
        ({"question": "   "}, "question"),
        ({"question": "x" * 10_001}, "question"),
        ({"question": "q", "parameters": {"temperature": 3}}, "parameters.temperature"),
        ({"question": "q", "parameters": {"max_tokens": 0}}, "parameters.max_tokens"),
        ({"question": "q", "parameters": "hot"}, "parameters"),
        ({"question": "q", "include_routing_metadata": "yes"}, "include_routing_metadata"),
        ({"question": "q", "tenant": "someone-else"}, "unknown_fields"),
        ({"question": "q", "intent": "Code Review!"}, "intent"),
        ({"question": "q", "backend": 7}, "backend"),
        ({"question": "q", "backend": ""}, "backend"),
        ({"question": "q", "session_id": 12}, "session_id"),
        ({"question": "q", "session_id": "not-a-uuid"}, "session_id"),
        ({"question": "q", "intent": ""}, "intent"),
        ({"question": "q", "parameters": {"stream": "yes"}}, "parameters.stream"),
        ({"question": "q", "parameters": {"temperature": True}}, "parameters.temperature"),
        ({"question": "q", "parameters": {"max_tokens": 2.5}}, "parameters.max_tokens"),
        ({"question": "q", "parameters": {"tweaks": "ChatInput-1"}}, "parameters.tweaks"),
        ({"question": "q", "parameters": {"tweaks": None}}, "parameters.tweaks"),
        # The schema types them without null: null is refused, not taken for "absent".
        ({"question": "q", "parameters": {"max_tokens": None}}, "parameters.max_tokens"),
        ({"question": "q", "parameters": {"temperature": None}}, "parameters.temperature"),
        ({"question": "q", "parameters": {"stream": None}}, "parameters.stream"),
    ],
)
@pytest.mark.parametrize("path", ["/api/v1/query", "/api/v1/route"])
def test_bad_input_is_refused_in_the_error_shape_and_changes_nothing(
    world: World, api_client: APIClient, payload: dict, field: str, path: str
) -> None:
    result = api_client.post(path, payload, format="json")

    assert result.status_code == 400
    error = result.json()["error"]
    assert error["type"] == "ValidationError"
    assert field in error["details"]["fields"]
    assert not RoutingDecision.objects.exists()
    assert not world.fw_route.called


@pytest.mark.parametrize("body", ["{nope", "[1, 2]", '"a question"'])
def test_a_body_that_is_not_a_json_object_is_refused(
    world: World, api_client: APIClient, body: str
) -> None:
    result = api_client.generic("POST", "/api/v1/query", body, content_type="application/json")

    assert result.status_code == 400
    assert result.json()["error"]["type"] == "ValidationError"
    assert not RoutingDecision.objects.exists()


def test_the_query_needs_an_api_key(world: World) -> None:
    result = APIClient().post("/api/v1/query", {"question": REVIEW}, format="json")

    assert result.status_code == 401
    assert result.json()["error"]["type"] == "AuthenticationError"
    assert not RoutingDecision.objects.exists()


def test_only_post_is_allowed(world: World, api_client: APIClient) -> None:
    assert api_client.get("/api/v1/query").status_code == 405


def test_routing_errors_carry_their_status(world: World, api_client: APIClient) -> None:
    result = api_client.post(
        "/api/v1/query", {"question": REVIEW, "backend": "nope"}, format="json"
    )

    assert result.status_code == 400
    assert result.json()["error"]["details"]["request_id"]


def test_streaming_answers_are_server_sent_events(world: World, api_client: APIClient) -> None:
    world.fw_route.mock(return_value=response("flowise", "prediction_agentflow_stream"))

    result = api_client.post(
        "/api/v1/query", {"question": REVIEW, "parameters": {"stream": True}}, format="json"
    )

    assert result["Content-Type"] == "text/event-stream"

    async def read() -> bytes:
        stream = result.streaming_content  # type: ignore[attr-defined]
        return b"".join([chunk async for chunk in stream])

    text = async_to_sync(read)().decode()
    blocks = [b for b in text.split("\n\n") if b]
    assert [b.splitlines()[0] for b in blocks] == ["event: chunk", "event: end"]
    end = json.loads(blocks[-1].splitlines()[1].removeprefix("data: "))
    assert end["routing"]["backend"] == "fw"
    assert end["trace_url"].startswith("http://testserver/decisions/")


def test_the_dry_run_scores_without_running(world: World, api_client: APIClient) -> None:
    result = api_client.post("/api/v1/route", {"question": REVIEW}, format="json")

    body = result.json()
    assert result.status_code == 200, body
    assert body["intent"] == "code-review"
    assert body["selected"]["backend"] == "fw"
    assert not world.fw_route.called
    assert not RoutingDecision.objects.exists()


def test_sessions_and_decisions_can_be_read_back(world: World, api_client: APIClient) -> None:
    first = api_client.post("/api/v1/query", {"question": REVIEW}, format="json").json()
    api_client.post(
        "/api/v1/query",
        {"question": "and refactor it", "session_id": first["session_id"]},
        format="json",
    )

    # Written behind the answers, and read at once: the reads wait for this process's writes.
    session = api_client.get(f"/api/v1/sessions/{first['session_id']}").json()
    decisions = api_client.get("/api/v1/decisions", {"intent": "code-review"}).json()
    one = api_client.get(f"/api/v1/decisions/{first['request_id']}").json()
    sessions = api_client.get("/api/v1/sessions").json()

    assert [t["question"] for t in session["turns"]] == [REVIEW, "and refactor it"]
    assert session["turns"][0]["backend"] == "fw"
    assert decisions["count"] == 2
    assert (one["outcome"], one["backend"]) == ("success", "fw")
    assert one["candidates"][0]["score"] > 0
    assert one["trace_url"] == first["trace_url"]  # the link the answer gave
    assert [(s["id"], s["first_question"], s["turn_count"]) for s in sessions] == [
        (first["session_id"], REVIEW, 2)
    ]


def test_the_dry_run_refuses_an_unknown_backend_and_explains_an_unavailable_one(
    world: World, api_client: APIClient
) -> None:
    world.set_health(world.lf, healthy=False, cooldown=True)

    unknown = api_client.post(
        "/api/v1/route", {"question": REVIEW, "backend": "nope"}, format="json"
    )
    down = api_client.post(
        "/api/v1/route", {"question": REVIEW, "backend": "lf", "fallback": False}, format="json"
    )
    passed_on = api_client.post(
        "/api/v1/route", {"question": REVIEW, "backend": "lf"}, format="json"
    )

    assert unknown.status_code == 400
    assert unknown.json()["error"]["details"]["backend"] == "nope"
    assert down.status_code == 200
    assert (down.json()["selected"], down.json()["error"]["type"]) == (None, "BackendUnavailable")
    assert passed_on.json()["selected"]["backend"] == "fw"  # the fallback a query would take


@override_settings(LLM_BASE_URL="http://llm.test/v1", LLM_API_KEY="sk-LLM-SECRET")
def test_no_secret_in_failures_dry_runs_streams_or_decisions(
    world: World, api_client: APIClient
) -> None:
    world.fail(world.fw_route, 401)
    world.fail(world.lf_route, 503)

    failed = api_client.post("/api/v1/query", {"question": REVIEW}, format="json")
    streamed = api_client.post(
        "/api/v1/query", {"question": REVIEW, "parameters": {"stream": True}}, format="json"
    )
    dry_run = api_client.post("/api/v1/route", {"question": REVIEW}, format="json")
    decisions = api_client.get("/api/v1/decisions")
    status = api_client.get("/api/v1/query-router/status")

    assert failed.json()["error"]["type"] == "AllBackendsFailed"
    for answered in (failed, dry_run, decisions, status):
        assert "SECRET" not in answered.content.decode()

    async def read() -> bytes:
        stream = streamed.streaming_content  # type: ignore[attr-defined]
        return b"".join([chunk async for chunk in stream])

    events = async_to_sync(read)().decode()
    assert "event: error" in events
    assert "SECRET" not in events


def test_a_session_filter_that_is_not_a_uuid_is_a_clear_error(
    world: World, api_client: APIClient
) -> None:
    result = api_client.get("/api/v1/decisions", {"session": "not-a-uuid"})

    assert result.status_code == 400
    assert result.json()["error"]["type"] == "ValidationError"


def test_other_tenants_cannot_read_them(world: World, api_client: APIClient) -> None:
    first = api_client.post("/api/v1/query", {"question": REVIEW}, format="json").json()
    _, raw_key = api_key_create(tenant=Tenant.objects.create(name="B", slug="b"), name="b")
    other = APIClient()
    other.credentials(HTTP_AUTHORIZATION=f"Bearer {raw_key}")

    assert other.get(f"/api/v1/sessions/{first['session_id']}").status_code == 404
    assert other.get(f"/api/v1/decisions/{first['request_id']}").status_code == 404
    assert other.get("/api/v1/decisions").json()["count"] == 0
    assert other.get("/api/v1/sessions").json() == []


def test_the_route_command_prints_one_json_object_per_stdin_line(
    world: World, monkeypatch: pytest.MonkeyPatch, api_client: APIClient
) -> None:
    monkeypatch.setattr("sys.stdin", StringIO(f"{REVIEW}\n\nwhat's the capital of Peru?\n"))
    out = StringIO()

    call_command("route", "--json", stdout=out)

    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [line["intent"] for line in lines] == ["code-review", "general"]
    assert lines[0] == api_client.post("/api/v1/route", {"question": REVIEW}, format="json").json()
    assert lines[0]["evidence"]["raw"]  # the patterns that matched, as the REST door says
    assert lines[0]["evidence"]["summary"].startswith("matched 'my pull request' and 'review'")
    assert lines[0]["selected"]["backend"] == "fw"
    assert not RoutingDecision.objects.exists()


LOCAL_REVIEW = "Can you review this function for bugs?"  # code-review, and LOCAL


def _scoped(world: World) -> None:
    """fw serves code reviews with two flows alike but for their scope: its reviewer
    serves corpus-wide (GLOBAL) questions, its line reviewer questions about one thing
    (LOCAL). (Which backend answers is for what routing learned to say: the scope
    chooses among a backend's flows.)"""
    world.fw_flow.scope = "global"
    world.fw_flow.save()
    Flow.objects.create(
        backend=world.fw,
        external_id="line-reviewer",
        name="line reviewer",
        deployed=True,
        intent_keywords=world.fw_flow.intent_keywords,
        scope="local",
    )
    refresh()


def test_without_query_routing_scope_is_ignored(world: World, api_client: APIClient) -> None:
    _scoped(world)

    body = api_client.post("/api/v1/query", {"question": LOCAL_REVIEW}, format="json").json()

    assert body["routing"]["query_type"] is None
    assert body["routing"]["backend"] == "fw"
    matches = {c["flow"]: c["match"] for c in body["routing"]["candidates"] if c["backend"] == "fw"}
    assert set(matches.values()) == {0.7}  # neither flow's scope counted


@override_settings(QUERY_ROUTING_ENABLED=True)
def test_with_query_routing_a_flow_whose_scope_fits_wins(
    world: World, api_client: APIClient
) -> None:
    _scoped(world)

    body = api_client.post("/api/v1/query", {"question": LOCAL_REVIEW}, format="json").json()
    out = StringIO()
    call_command("route", "--json", LOCAL_REVIEW, stdout=out)
    dry_run = json.loads(out.getvalue())

    assert body["routing"]["query_type"]["query_type"] == "LOCAL"
    assert (body["routing"]["backend"], body["routing"]["flow"]) == ("fw", "line reviewer")
    assert body["answer"] == FW_ANSWER
    assert (dry_run["query_type"], dry_run["selected"]["flow"]) == ("LOCAL", "line reviewer")
    assert dry_run["selected"]["match"] == pytest.approx(0.7 + 0.1)  # the fit's bonus
    assert dry_run["query_type_confidence"] >= 0.7
    drain()
    decision = RoutingDecision.objects.get()
    assert decision.query_type == "LOCAL"
    assert decision.evidence["query_type"]["local_weight"] == 1.0
    assert decision.evidence["query_type"]["reasoning"]


@override_settings(QUERY_ROUTING_ENABLED=True)
def test_the_route_command_prints_a_readable_plan(world: World) -> None:
    out = StringIO()

    call_command("route", LOCAL_REVIEW, stdout=out)

    printed = out.getvalue()
    assert "intent code-review" in printed
    assert "LOCAL 0.78" in printed
    assert "  because: matched 'review this function' and 'bugs' (code-review rules " in printed
    assert "fw / reviewer" in printed


def test_the_route_command_reports_an_unavailable_backend(world: World) -> None:
    world.set_health(world.lf, healthy=False, cooldown=True)
    out = StringIO()

    call_command("route", "--json", "--backend", "lf", "--no-fallback", REVIEW, stdout=out)

    line = json.loads(out.getvalue())
    assert line["selected"] is None
    assert line["error"]["type"] == "BackendUnavailable"


def test_the_ask_command_prints_the_answer_then_one_line(
    world: World, caplog: pytest.LogCaptureFixture
) -> None:
    out = StringIO()

    with caplog.at_level(logging.INFO):
        call_command("ask", REVIEW, "--backend", "lf", stdout=out)

    answer, blank, summary, why, session, *rest = out.getvalue().splitlines()
    decision = RoutingDecision.objects.get()
    assert (answer, blank, rest) == ("hello langflow", "", [])
    assert re.fullmatch(
        rf"code-review \(rules 0\.\d\d\) · lf / echo · \d+ ms · "
        rf"http://127\.0\.0\.1:8000/decisions/{decision.request_id}",
        summary,
    ), summary
    assert why.startswith("Why code-review: matched 'my pull request' and 'review' (code-")
    sid = decision.request_id  # a one-shot question's: continued, it starts the session
    assert session == f"Session {sid}: to continue it, ask ... --session {sid}"
    assert decision.tenant.slug == "default"
    assert not [r for r in caplog.records if r.name == "flywheel.decisions"]  # said once


def test_the_ask_commands_link_is_where_make_run_last_served(
    world: World, settings: Any, tmp_path: Path
) -> None:
    """`PORT=8001 make run`: its links, printed by `ask` in another terminal and by the
    MCP server over stdio, are on 8001 (make run's `manage.py serve` notes where)."""
    settings.VAR_DIR = tmp_path
    served_at("0.0.0.0", 8001)  # noqa: S104 - as `make run HOST=0.0.0.0` passes it
    out = StringIO()

    call_command("ask", REVIEW, "--backend", "lf", stdout=out)

    decision = RoutingDecision.objects.get()
    assert f"· http://127.0.0.1:8001/decisions/{decision.request_id}" in out.getvalue()
    settings.PUBLIC_URL = "https://flywheel.example"  # said outright, it wins
    assert public_url() == "https://flywheel.example"


def test_the_ask_command_prints_the_whole_answer_with_json(world: World) -> None:
    out = StringIO()

    call_command("ask", REVIEW, "--backend", "lf", "--json", stdout=out)

    body = json.loads(out.getvalue())
    assert body["answer"] == "hello langflow"
    assert body["routing"]["backend"] == "lf"
    assert body["routing"]["evidence"]


def test_the_ask_command_says_what_went_wrong_in_one_line(world: World) -> None:
    with pytest.raises(CommandError) as raised:
        call_command("ask", REVIEW, "--backend", "nowhere", stdout=StringIO())

    assert "\n" not in str(raised.value)
    assert str(raised.value) == (
        "ValidationError: No backend named 'nowhere', of that kind or with that id."
    )


def test_the_trace_page_shows_the_decision_to_staff(
    world: World, api_client: APIClient, admin_client
) -> None:
    world.fail(world.fw_route)
    body = api_client.post("/api/v1/query", {"question": REVIEW}, format="json").json()
    path = f"/decisions/{body['request_id']}"
    drain()

    page = admin_client.get(path)
    anonymous = APIClient().get(path)

    html = page.content.decode()
    assert page.status_code == 200
    assert REVIEW in html
    assert "failed" in html  # fw's attempt in the chain
    assert "SECRET" not in html
    assert anonymous.status_code == 302  # to the login page

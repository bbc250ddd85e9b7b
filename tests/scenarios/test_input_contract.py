"""The input contract (issue 11, sections 4 and 7): bad input is a 400, 404 or 415 in the
error shape on every door, never a 500, and a refused input changes nothing."""

from __future__ import annotations

import contextlib
import json
import socket
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from rest_framework.test import APIClient

from analytics.api import DecisionPagination
from backends.models import Backend
from flywheel.errors import ValidationError
from flywheel.jsonin import MAX_DEPTH, parse_json
from flywheel.models import Tenant
from routing.answering.query_input import query_request
from routing.models import PerformanceRecord, RoutingDecision, Session, Turn
from routing.recording.writer import drain
from tests.routing_world import LF_ANSWER, World

pytestmark = pytest.mark.django_db(transaction=True)

REVIEW = "Please review my pull request"
DOORS = ["/api/v1/query", "/api/v1/route", "/api/v1/backends"]


def _nested(depth: int) -> str:
    return '{"a": ' * depth + "1" + "}" * depth


# Each as sent on the wire: the escapes are JSON's, not Python's.
BAD_BODIES = {
    "nested 1000 deep": '{"question": "q", "parameters": ' + _nested(1000) + "}",
    "nested 100000 deep": '{"question": "q", "parameters": ' + _nested(100_000) + "}",
    "a lone surrogate": '{"question": "bad \\ud800"}',
    "a NUL character": '{"question": "hello\\u0000world"}',
    "a NUL in a key": '{"question": "q", "parameters": {"a\\u0000": 1}}',
    "NaN": '{"question": "q", "parameters": {"temperature": NaN}}',
    "Infinity": '{"question": "q", "parameters": {"tweaks": {"x": Infinity}}}',
    "-Infinity": '{"question": "q", "parameters": {"tweaks": {"x": -Infinity}}}',
    "a number past a float": '{"question": "q", "parameters": {"tweaks": {"x": 1e400}}}',
    "not UTF-8": b'{"question": "\xff"}',
}


@pytest.mark.parametrize("body", BAD_BODIES.values(), ids=BAD_BODIES.keys())
@pytest.mark.parametrize("path", DOORS)
def test_bodies_json_cannot_carry_safely_are_refused_and_change_nothing(
    world: World, api_client: APIClient, path: str, body: str | bytes
) -> None:
    backends = Backend.objects.count()

    # Bytes are sent as they are (the stubs say str only).
    result = api_client.generic("POST", path, body, content_type="application/json")  # type: ignore[arg-type]

    assert result.status_code == 400, result.content
    assert result.json()["error"]["type"] == "ValidationError"
    drain()  # nothing may be on its way to the database either
    assert not RoutingDecision.objects.exists()
    assert Backend.objects.count() == backends
    assert not world.fw_route.called
    assert not world.lf_route.called


# The parser itself refuses these, before any field check: its answer names the path.
PARSER_REFUSALS = {
    "/api/v1/query": ('{"question": "hello\\u0000world"}', "$.question"),
    "/api/v1/route": ('{"question": "bad \\ud800"}', "$.question"),
    "/api/v1/backends": (
        '{"name": "fw\\u0000", "kind": "flowise", "base_url": "http://fw.test"}',
        "$.name",
    ),
}


@pytest.mark.parametrize("path", DOORS)
def test_the_strict_parser_refuses_before_the_fields_are_checked(
    api_client: APIClient, path: str
) -> None:
    body, where = PARSER_REFUSALS[path]

    result = api_client.generic("POST", path, body, content_type="application/json")

    assert result.status_code == 400, result.content
    assert result.json()["error"]["details"]["path"] == where
    assert not Backend.objects.exists()


@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded", ""])
@pytest.mark.parametrize("path", ["/api/v1/query", "/api/v1/route"])
def test_a_query_not_sent_as_json_is_unsupported_media(
    world: World, api_client: APIClient, path: str, content_type: str
) -> None:
    body = json.dumps({"question": REVIEW})

    result = api_client.generic("POST", path, body, content_type=content_type)

    assert result.status_code == 415
    assert result.json()["error"]["type"] == "UnsupportedMediaType"
    drain()
    assert not RoutingDecision.objects.exists()
    assert not world.fw_route.called


def test_a_question_of_astral_characters_is_taken(world: World, api_client: APIClient) -> None:
    # A surrogate *pair* is one valid character (U+1F600): only lone halves are refused.
    body = '{"question": "Please review my pull request \\ud83d\\ude00"}'

    result = api_client.generic("POST", "/api/v1/query", body, content_type="application/json")

    assert result.status_code == 200, result.content
    drain()
    assert RoutingDecision.objects.get().question.endswith("\U0001f600")


def test_nesting_is_taken_up_to_the_limit_and_refused_past_it() -> None:
    assert parse_json(_nested(MAX_DEPTH)) is not None
    with pytest.raises(ValidationError) as refused:
        parse_json(_nested(MAX_DEPTH + 1))
    assert refused.value.details["path"] == "$" + ".a" * MAX_DEPTH


# --- the same rules for doors that do not parse JSON (commands, tools) ---------------------


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"question": "hello\x00world"}, "question"),
        ({"question": "bad \ud800"}, "question"),
        ({"question": "q", "backend": "fw\x00"}, "backend"),
        ({"question": "q", "intent": ""}, "intent"),
        ({"question": "q", "intent": "code-review\n"}, "intent"),
        ({"question": "q", "session_id": "not-a-uuid"}, "session_id"),
        ({"question": "q", "session_id": "\x00"}, "session_id"),
        ({"question": "q", "parameters": {"temperature": 1, "x": float("nan")}}, "parameters"),
        ({"question": "q", "parameters": {"x": "\x00"}}, "parameters"),
        ({"question": "q", "parameters": json.loads(_nested(MAX_DEPTH))}, "parameters"),
        ({"question": "q", "tenant": "someone-else"}, "unknown_fields"),
    ],
)
def test_every_door_validates_a_query_the_same_way(fields: dict[str, Any], field: str) -> None:
    with pytest.raises(ValidationError) as refused:
        query_request(fields)

    assert field in refused.value.details["fields"]


def test_a_session_id_is_the_hyphenated_uuid_answers_give() -> None:
    given = "7C4E3A2B-1111-4222-8333-444455556666"

    assert query_request({"question": "q", "session_id": given}).session_id == given.lower()
    for other_spelling in [f"{{{given}}}", given.replace("-", ""), f"urn:uuid:{given}"]:
        with pytest.raises(ValidationError):
            query_request({"question": "q", "session_id": other_spelling})


def test_a_malformed_session_id_is_refused_before_routing(
    world: World, api_client: APIClient
) -> None:
    result = api_client.post(
        "/api/v1/query", {"question": REVIEW, "session_id": "not-a-uuid"}, format="json"
    )

    assert result.status_code == 400
    assert "session_id" in result.json()["error"]["details"]["fields"]
    drain()
    assert not RoutingDecision.objects.exists()  # as every other field refused at the door


@pytest.mark.parametrize("session_id", ["None", "not-a-uuid", "%C2%B2"])
def test_a_session_path_that_is_not_a_uuid_is_not_found(
    api_client: APIClient, session_id: str
) -> None:
    result = api_client.get(f"/api/v1/sessions/{session_id}")

    assert result.status_code == 404
    assert result.json()["error"]["type"] == "NotFoundError"


# --- an answer the database could not store as it came --------------------------------------


@pytest.mark.parametrize(("answer", "stored"), [("a\x00b", "a\ufffdb"), ("x\ud800y", "x\ufffdy")])
def test_an_answer_holding_nul_or_a_lone_surrogate_is_answered_and_recorded(
    world: World, api_client: APIClient, tenant: Tenant, answer: str, stored: str
) -> None:
    import httpx

    from tests.captured import body

    payload = body("flowise", "prediction_agentflow") | {"text": answer}
    world.fw_route.mock(return_value=httpx.Response(200, content=json.dumps(payload).encode()))

    session = str(Session.objects.create(tenant=tenant).pk)  # whose turns keep the answers
    asked = {"question": REVIEW, "session_id": session}
    result = api_client.post("/api/v1/query", asked, format="json")

    assert result.status_code == 200, result.content
    assert result.json()["answer"] == answer  # the client hears what the backend said
    drain()  # the rows are written behind the answer
    decision = RoutingDecision.objects.get()
    assert (decision.outcome, decision.backend) == ("success", world.fw)
    assert Turn.objects.get(session_id=result.json()["session_id"]).answer == stored
    assert PerformanceRecord.objects.filter(decision=decision, success=True).count() == 1


# --- query-string values -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "params", "parameter"),
    [
        ("/api/v1/flows", {"intent": "\x00"}, "intent"),
        ("/api/v1/flows", {"intent": "Code Review"}, "intent"),
        ("/api/v1/flows", {"backend": "\x00"}, "backend"),
        ("/api/v1/flows", {"backend": "x" * 101}, "backend"),
        ("/api/v1/decisions", {"intent": "\x00"}, "intent"),
        ("/api/v1/decisions", {"outcome": "\x00"}, "outcome"),
        ("/api/v1/decisions", {"outcome": "won"}, "outcome"),
        ("/api/v1/decisions", {"backend": "\x00"}, "backend"),
        ("/api/v1/decisions", {"session": "\x00"}, "session"),
        ("/api/v1/decisions", {"session": "not-a-uuid"}, "session"),
    ],
)
def test_a_filter_no_row_could_match_is_refused_naming_it(
    world: World, api_client: APIClient, path: str, params: dict[str, str], parameter: str
) -> None:
    result = api_client.get(path, params)

    assert result.status_code == 400, result.content
    error = result.json()["error"]
    assert error["type"] == "ValidationError"
    assert list(error["details"]["fields"]) == [parameter]


@pytest.mark.parametrize(
    ("path", "params", "message"),
    [
        ("/api/v1/flows", {"intent": "Code Review"}, "The intent filter is not valid."),
        ("/api/v1/decisions", {"outcome": "won"}, "The outcome filter is not valid."),
        ("/api/v1/sessions", {"limit": "0"}, "The limit parameter is not valid."),
        (
            "/api/v1/analytics/timeseries",
            {"backend": "\x00"},
            "The backend parameter is not valid.",
        ),
        (
            "/api/v1/analytics/classification",
            {"format": "csv"},
            "The format parameter is not valid.",
        ),
    ],
)
def test_a_refused_parameter_is_named_in_the_message(
    api_client: APIClient, path: str, params: dict[str, str], message: str
) -> None:
    # Each is declared once, in its read's contract, which words the refusal.
    result = api_client.get(path, params)

    assert result.status_code == 400, result.content
    assert result.json()["error"]["message"] == message


@pytest.mark.parametrize("backend", ["\u00b2", "99999999999999999999", "no-such-backend"])
def test_a_backend_filter_that_names_nothing_is_an_empty_answer(
    world: World, api_client: APIClient, backend: str
) -> None:
    api_client.post("/api/v1/query", {"question": REVIEW}, format="json")

    flows = api_client.get("/api/v1/flows", {"backend": backend})
    decisions = api_client.get("/api/v1/decisions", {"backend": backend})

    assert (flows.status_code, flows.json()) == (200, [])
    assert (decisions.status_code, decisions.json()["count"]) == (200, 0)


def test_a_backend_filter_takes_an_id_or_a_name(world: World, api_client: APIClient) -> None:
    by_id = api_client.get("/api/v1/flows", {"backend": str(world.fw.pk)}).json()
    by_name = api_client.get("/api/v1/flows", {"backend": "FW"}).json()

    assert [f["name"] for f in by_id] == [f["name"] for f in by_name] == ["reviewer"]


@pytest.mark.parametrize(
    ("params", "parameter"),
    [
        ({"limit": "abc"}, "limit"),
        ({"limit": "-1"}, "limit"),
        ({"limit": "0"}, "limit"),
        ({"limit": "501"}, "limit"),
        ({"limit": "\u0663"}, "limit"),  # ARABIC-INDIC DIGIT THREE: int() takes it
        ({"limit": ""}, "limit"),
        ({"offset": "-1"}, "offset"),
        ({"offset": "1.5"}, "offset"),
        ({"offset": str(2**31)}, "offset"),
    ],
)
def test_a_limit_or_offset_that_is_not_an_integer_in_range_is_refused(
    world: World, api_client: APIClient, params: dict[str, str], parameter: str
) -> None:
    result = api_client.get("/api/v1/decisions", params)

    assert result.status_code == 400, result.content
    assert list(result.json()["error"]["details"]["fields"]) == [parameter]


def test_pages_follow_limit_and_offset(world: World, api_client: APIClient) -> None:
    questions = [REVIEW, "and refactor it", "and the tests?"]
    for question in questions:
        api_client.post("/api/v1/query", {"question": question}, format="json")

    pages = [
        api_client.get("/api/v1/decisions", {"limit": "1", "offset": str(offset)}).json()
        for offset in range(3)
    ]

    assert [page["count"] for page in pages] == [3, 3, 3]
    assert sorted(d["question"] for page in pages for d in page["results"]) == sorted(questions)


def test_an_empty_decision_filter_is_no_filter(world: World, api_client: APIClient) -> None:
    # The schema marks these allowEmptyValue; the fuzzer holds the server to it.
    api_client.post("/api/v1/query", {"question": REVIEW}, format="json")

    result = api_client.get("/api/v1/decisions?intent=&outcome=&backend=&session=")

    assert result.status_code == 200
    assert result.json()["count"] == 1


def test_the_schema_states_the_page_bounds_the_server_enforces() -> None:
    bounds = {
        p["name"]: p["schema"] for p in DecisionPagination().get_schema_operation_parameters(None)
    }

    assert (bounds["limit"]["minimum"], bounds["limit"]["maximum"]) == (1, 500)
    assert (bounds["offset"]["minimum"], bounds["offset"]["maximum"]) == (0, 2**31 - 1)


def test_a_request_django_refuses_as_suspicious_answers_in_the_error_shape(
    world: World, api_client: APIClient
) -> None:
    many = "&".join(f"f{i}=1" for i in range(1001))  # past DATA_UPLOAD_MAX_NUMBER_FIELDS

    result = api_client.get(f"/api/v1/decisions?{many}")

    assert result.status_code == 400
    assert result.json()["error"] == {
        "type": "BadRequest",
        "message": "The request could not be accepted as sent.",
        "details": {"reason": "TooManyFieldsSent"},
    }


# --- a backend that fails on Flywheel's side of the call ----------------------------------


@pytest.fixture
def listener() -> Iterator[tuple[str, list[bytes]]]:
    """A real socket on loopback that records whatever reaches it and never answers."""
    received: list[bytes] = []
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(5)

    def accept() -> None:
        try:
            connection, _ = server.accept()
        except OSError:
            return
        with connection, contextlib.suppress(OSError):
            connection.settimeout(2)
            received.append(connection.recv(65536))

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.getsockname()[1]}", received
    server.close()
    thread.join(timeout=5)


class _LoopbackOnTheWire:
    """Requests to 127.0.0.1 cross the product's own transport (aiohttp, real sockets);
    the rest go to the respx mocks, as in every other test."""

    def __init__(self, **_: Any) -> None:
        from tests.httpx_transport import HttpxTransport

        self.mocked = HttpxTransport()

    async def send(self, request: Any, *, stream: bool = False) -> Any:
        from backends.http import NetworkTransport

        if request.url.host != "127.0.0.1":
            return await self.mocked.send(request, stream=stream)
        wire = NetworkTransport()  # one per request: closed in the loop that opened it
        try:
            return await wire.send(request, stream=stream)
        finally:
            await wire.aclose()

    async def aclose(self) -> None:
        await self.mocked.aclose()


def test_a_backend_key_holding_a_line_break_falls_back_to_the_next_candidate(
    world: World,
    api_client: APIClient,
    listener: tuple[str, list[bytes]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from backends.http import client as http
    from tests.routing_world import refresh

    base_url, received = listener
    monkeypatch.setattr(http, "network_transport", _LoopbackOnTheWire)
    # Written past validation, as a row saved before keys were checked would be.
    Backend.objects.filter(pk=world.fw.pk).update(
        base_url=base_url, api_key="sk-FW-SECRET\r\nX-Injected: yes"
    )
    refresh()

    result = api_client.post("/api/v1/query", {"question": REVIEW}, format="json")

    body = result.json()
    assert result.status_code == 200, body
    assert body["answer"] == LF_ANSWER
    chain = body["routing"]["fallback_chain"]
    assert [(a["backend"], a["ok"]) for a in chain] == [("fw", False), ("lf", True)]
    # Refused before sending (backends/http/client.py), or failed inside the HTTP client (aiohttp
    # raises ValueError): either way the fault is on Flywheel's side, and named so.
    assert chain[0]["error_type"] in {"ConfigurationError", "ClientError"}
    assert "SECRET" not in result.content.decode()
    assert "X-Injected" not in result.content.decode()
    assert not any(b"X-Injected" in data for data in received)  # no header was smuggled
    drain()
    decision = RoutingDecision.objects.get()
    assert (decision.outcome, decision.backend) == ("fallback", world.lf)

"""The Flowise adapter, replaying responses captured from a real Flowise 3.1.4."""

from __future__ import annotations

import json
from collections.abc import Callable

import httpx
import pytest

from backends.adapters.base import BackendConfig, StreamEvent, Usage
from backends.adapters.flowise import FlowiseBackend
from backends.adapters.flowise_records import discovered_flow
from backends.errors import (
    BackendAuthenticationError,
    BackendConnectionError,
    BackendError,
    BackendNotFoundError,
    BackendRateLimitError,
    BackendTimeoutError,
    BackendUnexpectedError,
    BackendValidationError,
)
from backends.http import HttpClient
from tests.captured import FIXTURES, body, response
from tests.httpx_transport import HttpxTransport

CONFIG = BackendConfig(
    id=1,
    name="fw",
    kind="flowise",
    base_url="http://fw.test",
    api_key="sk-SECRET",
    timeout_seconds=5,
)
AGENTFLOW_ID = body("flowise", "chatflow_get")["id"]

Handler = Callable[[httpx.Request], httpx.Response]


@pytest.fixture(autouse=True)
def _fast_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(HttpClient, "backoff_base_seconds", 0.001)


def adapter(handler: Handler) -> FlowiseBackend:
    return FlowiseBackend.build(CONFIG, transport=HttpxTransport(httpx.MockTransport(handler)))


def always(name: str, sent: list[httpx.Request] | None = None) -> Handler:
    def handle(request: httpx.Request) -> httpx.Response:
        if sent is not None:
            sent.append(request)
        return response("flowise", name)

    return handle


async def test_health_check_is_ok_on_pong() -> None:
    result = await adapter(always("ping")).health_check()

    assert result.ok
    assert result.latency_ms >= 0


async def test_health_check_reports_a_wrong_answer() -> None:
    result = await adapter(always("unknown_route")).health_check()

    assert not result.ok
    assert "unexpected ping answer" in result.error


async def test_health_check_reports_a_refused_connection() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused", request=request)

    result = await adapter(refuse).health_check()

    assert not result.ok
    assert "could not be reached" in result.error


async def test_discovery_asks_once_per_page() -> None:
    sent: list[httpx.Request] = []
    pages = {"1": "chatflows_page1", "2": "chatflows_page2"}

    def handle(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        return response("flowise", pages[request.url.params["page"]])

    flows = (await adapter(handle).discover_flows()).flows

    assert [f.name for f in flows] == ["echo-agentflow", "echo-chatflow"]
    assert [f.flow_type for f in flows] == ["AGENTFLOW", "CHATFLOW"]
    assert all(f.deployed for f in flows)
    assert len(sent) == 2
    assert sent[0].headers["authorization"] == "Bearer sk-SECRET"


async def test_discovering_200_flows_costs_two_requests() -> None:
    record = body("flowise", "chatflows_page1")["data"][0]
    records = [{**record, "id": f"id-{i}", "name": f"flow {i}"} for i in range(200)]
    sent: list[httpx.Request] = []

    def handle(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        page, limit = int(request.url.params["page"]), int(request.url.params["limit"])
        chunk = records[(page - 1) * limit : page * limit]
        return httpx.Response(200, json={"data": chunk, "total": len(records)})

    flows = (await adapter(handle).discover_flows()).flows

    assert len(flows) == 200
    assert len({f.external_id for f in flows}) == 200
    assert len(sent) == 2


async def test_a_prediction_puts_the_session_and_parameters_in_override_config() -> None:
    sent: list[httpx.Request] = []

    result = await adapter(always("prediction_agentflow", sent)).execute_flow(
        AGENTFLOW_ID,
        "hello flowise",
        session_id="fixture-session",
        parameters={"temperature": 0.2, "max_tokens": 50},
    )

    payload = json.loads(sent[0].content)
    assert payload["question"] == "hello flowise"
    assert payload["overrideConfig"] == {
        "sessionId": "fixture-session",
        "temperature": 0.2,
        "maxTokens": 50,
    }
    assert "sessionId" not in payload  # Flowise ignores a top-level one
    assert result.text == "Echo: hello flowise"
    assert result.session_id == "fixture-session"
    assert result.metadata["chatMessageId"]


async def test_a_prediction_is_not_retried() -> None:
    sent: list[httpx.Request] = []

    def unavailable(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        return httpx.Response(503, json={"message": "busy"})

    with pytest.raises(BackendUnexpectedError):
        await adapter(unavailable).execute_flow(AGENTFLOW_ID, "once only")
    assert len(sent) == 1


async def test_reads_are_retried_on_503_then_succeed() -> None:
    answers = iter([httpx.Response(503), httpx.Response(503), response("flowise", "chatflow_get")])

    record = await adapter(lambda request: next(answers)).get_flow(AGENTFLOW_ID)

    assert record.name == "echo-agentflow"
    assert isinstance(record.flow_data, dict)


async def test_streaming_normalises_sse_into_chunks_and_an_end() -> None:
    sent: list[httpx.Request] = []

    events = [
        e
        async for e in adapter(always("prediction_agentflow_stream", sent)).stream_flow(
            AGENTFLOW_ID, "hello flowise"
        )
    ]

    assert json.loads(sent[0].content)["streaming"] is True
    assert [e.type for e in events] == ["chunk", "end"]
    assert events[0].text == events[1].text == "Echo: hello flowise"
    assert events[1].session_id


async def test_streaming_a_non_streaming_flow_returns_its_json_answer() -> None:
    events = [e async for e in adapter(always("prediction_chatflow")).stream_flow("x", "q")]

    assert [(e.type, e.text) for e in events] == [
        ("chunk", "Echo: hello flowise"),
        ("end", "Echo: hello flowise"),
    ]


async def test_an_error_event_inside_a_200_stream_raises() -> None:
    stream = (
        'message:\ndata:{"event":"error","data":"Error: predictionsServices.buildChatflow - '
        'Start input type not found"}\n\nmessage:\ndata:{"event":"end","data":"[DONE]"}\n\n'
    )

    def handle(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, text=stream, headers={"content-type": "text/event-stream"})

    with pytest.raises(BackendNotFoundError, match="Start input type not found"):
        async for _ in adapter(handle).stream_flow(AGENTFLOW_ID, "q"):
            pass


@pytest.mark.parametrize(
    ("capture", "error"),
    [
        ("wrong_api_key", BackendAuthenticationError),
        ("chatflow_get_unknown", BackendNotFoundError),
        ("chatflow_get_invalid_id", BackendValidationError),
        ("unknown_route", BackendNotFoundError),
    ],
)
async def test_get_errors_come_out_typed(capture: str, error: type[BackendError]) -> None:
    with pytest.raises(error) as raised:
        await adapter(always(capture)).get_flow(AGENTFLOW_ID)

    assert "sk-SECRET" not in str(raised.value.as_dict())


async def test_deleting_an_unknown_chatflow_is_not_found_despite_the_500() -> None:
    with pytest.raises(BackendNotFoundError) as raised:
        await adapter(always("chatflow_delete_unknown")).delete_flow("0000")
    assert raised.value.http_status == 500


@pytest.mark.parametrize("capture", ["chatflow_create_bad_type", "chatflow_create_bad_flowdata"])
async def test_bad_flow_definitions_are_validation_errors(capture: str) -> None:
    with pytest.raises(BackendValidationError):
        await adapter(always(capture)).create_flow(
            name="x", flow_data={"nodes": [], "edges": []}, flow_type="NOPE"
        )


async def test_creating_a_chatflow_sends_flow_data_as_a_json_string() -> None:
    sent: list[httpx.Request] = []
    flow_data: dict[str, list[object]] = {"nodes": [], "edges": []}

    created = await adapter(always("chatflow_create", sent)).create_flow(
        name="fixture-scratch", flow_data=flow_data, flow_type="CHATFLOW"
    )

    assert json.loads(json.loads(sent[0].content)["flowData"]) == flow_data
    assert created.name == "fixture-scratch"


async def test_deploy_sets_deployed_through_an_update() -> None:
    sent: list[httpx.Request] = []

    await adapter(always("chatflow_get", sent)).deploy_flow(AGENTFLOW_ID)

    assert (sent[0].method, json.loads(sent[0].content)) == ("PUT", {"deployed": True})


async def test_a_generator_error_inside_a_200_is_a_validation_error() -> None:
    with pytest.raises(BackendValidationError, match="could not generate") as raised:
        await adapter(always("generator_no_llm")).generate_flow("q", {"name": "x"})
    assert raised.value.details["raw_response"]


async def test_a_429_is_a_rate_limit_error_after_retries_honouring_retry_after() -> None:
    sent: list[httpx.Request] = []

    def limited(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        return httpx.Response(
            429, json={"message": "Too many requests"}, headers={"retry-after": "0"}
        )

    with pytest.raises(BackendRateLimitError):
        await adapter(limited).list_flows()
    assert len(sent) == 1 + HttpClient.max_retries


async def test_a_read_timeout_is_a_timeout_error() -> None:
    def hang(request: httpx.Request) -> httpx.Response:
        raise httpx.ReadTimeout("no answer", request=request)

    with pytest.raises(BackendTimeoutError):
        await adapter(hang).execute_flow(AGENTFLOW_ID, "q")


async def test_a_refused_connection_is_a_connection_error_after_retries() -> None:
    sent: list[httpx.Request] = []

    def refuse(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        raise httpx.ConnectError("refused", request=request)

    with pytest.raises(BackendConnectionError) as raised:
        await adapter(refuse).discover_flows()
    assert len(sent) == 1 + HttpClient.max_retries
    assert raised.value.as_dict()["error"]["type"] == "ConnectionError"


# --- what an error tells: Flywheel's words, never a body, never our key -------------------

OPAQUE = BackendConfig(
    id=3, name="fw", kind="flowise", base_url="http://fw.test", api_key="Zq7opaqueKEYvalue"
)


def _opaque(handler: Handler) -> FlowiseBackend:
    return FlowiseBackend.build(OPAQUE, transport=HttpxTransport(httpx.MockTransport(handler)))


async def test_an_error_page_is_described_not_repeated() -> None:
    page = "<html>INTERNAL_ONLY_TOKEN=abc123 stack trace ...</html>"

    def fail(request: httpx.Request) -> httpx.Response:
        return httpx.Response(500, text=page, headers={"content-type": "text/html; charset=utf-8"})

    with pytest.raises(BackendUnexpectedError) as raised:
        await adapter(fail).execute_flow(AGENTFLOW_ID, "q")

    error = raised.value.as_dict()["error"]
    assert "INTERNAL_ONLY_TOKEN" not in json.dumps(error)
    assert error["message"] == f"Flowise backend 'fw': HTTP 500, text/html, {len(page)} bytes"
    assert error["details"] == {
        "backend": "fw",
        "http_status": 500,
        "content_type": "text/html",
        "size": len(page),
    }


@pytest.mark.parametrize(
    "message",
    [
        "denied for {auth}",
        "denied for {token}",
        "key={token}; password=hunter2 api_key: abc Basic dXNlcjpwYXNzd29yZDEyMw==",
    ],
)
async def test_a_json_error_message_stays_but_loses_credentials(message: str) -> None:
    def echo(request: httpx.Request) -> httpx.Response:
        auth = request.headers["authorization"]
        text = message.format(auth=auth, token=auth.split()[1])
        return httpx.Response(500, json={"message": text + " " + "x" * 500})

    with pytest.raises(BackendUnexpectedError) as raised:
        await _opaque(echo).execute_flow(AGENTFLOW_ID, "q")

    shown = json.dumps(raised.value.as_dict())
    assert raised.value.message.startswith("Flowise backend 'fw': ")
    assert "[redacted]" in raised.value.message
    for secret in ("Zq7opaqueKEYvalue", "hunter2", "dXNlcjpwYXNzd29yZDEyMw"):
        assert secret not in shown
    assert len(raised.value.message) <= 300


async def test_a_stream_error_that_echoes_our_key_is_scrubbed() -> None:
    def stream(request: httpx.Request) -> httpx.Response:
        event = {"event": "error", "data": f"bad key {request.headers['authorization']}"}
        text = f"message:\ndata:{json.dumps(event)}\n\n"
        return httpx.Response(200, text=text, headers={"content-type": "text/event-stream"})

    with pytest.raises(BackendError) as raised:
        async for _ in _opaque(stream).stream_flow(AGENTFLOW_ID, "q"):
            pass

    assert "Zq7opaqueKEYvalue" not in raised.value.message
    assert "[redacted]" in raised.value.message


@pytest.mark.parametrize("answer", ['"just a string"', "[1, 2]", "42"])
async def test_answers_of_the_wrong_shape_are_backend_errors_not_crashes(answer: str) -> None:
    def odd(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, text=answer, headers={"content-type": "application/json"})

    with pytest.raises(BackendUnexpectedError):
        await adapter(odd).execute_flow(AGENTFLOW_ID, "q")
    if answer != "[1, 2]":  # a list is a server that does not paginate
        with pytest.raises(BackendUnexpectedError):
            await adapter(odd).discover_flows()
    with pytest.raises(BackendUnexpectedError):
        async for _ in adapter(odd).stream_flow(AGENTFLOW_ID, "q"):
            pass


# --- token usage: fixtures captured with LLM nodes on the fake OpenAI server ---------------
# (scripts/peers/fake_openai.py; flows in tests/peers/flowise-fake-llm-*.json). Flowise
# prices gpt-4o-mini from its own model list: 1.5e-07 per input, 6e-07 per output token.

# Usage figures (prompt, completion, total, cost); the cost is a float sum, hence approx.
Figures = tuple[int | None, int | None, int | None, object]
ONE_LLM: Figures = (5, 3, 8, pytest.approx(2.55e-06))
# Two chained nodes: 5 + 6 input, 3 + 4 output tokens; each node reports only its own.
TWO_LLMS: Figures = (11, 7, 18, pytest.approx(2.55e-06 + 3.3e-06))


def figures(usage: Usage | None) -> Figures | None:
    if usage is None:
        return None
    return (usage.prompt_tokens, usage.completion_tokens, usage.total_tokens, usage.cost)


def captured_stream(name: str) -> Handler:
    """Replays a raw SSE body captured from Flowise (tests/fixtures/flowise/<name>.txt)."""
    raw = (FIXTURES / "flowise" / f"{name}.txt").read_text()

    def handle(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, text=raw, headers={"content-type": "text/event-stream"})

    return handle


async def streamed(handler: Handler) -> list[StreamEvent]:
    return [e async for e in adapter(handler).stream_flow(AGENTFLOW_ID, "hello flowise")]


@pytest.mark.parametrize(
    ("capture", "usage"),
    [("prediction_llm_usage", ONE_LLM), ("prediction_two_llm_usage", TWO_LLMS)],
)
async def test_a_prediction_sums_the_usage_and_cost_of_its_llm_nodes(
    capture: str, usage: Figures
) -> None:
    result = await adapter(always(capture)).execute_flow(AGENTFLOW_ID, "hello flowise")

    assert figures(result.usage) == usage
    assert result.text.startswith("FAKE-LLM: ")


@pytest.mark.parametrize(
    "capture", ["prediction_agentflow", "prediction_chatflow", "prediction_llm_chatflow_usage"]
)
async def test_answers_without_usage_have_none_not_zeros(capture: str) -> None:
    # The last one is a CHATFLOW whose LLM chain did run: Flowise reports no usage for it.
    result = await adapter(always(capture)).execute_flow(AGENTFLOW_ID, "hello flowise")

    assert result.usage is None


@pytest.mark.parametrize(
    ("capture", "usage", "text"),
    [
        ("prediction_llm_usage_stream", ONE_LLM, "FAKE-LLM: hello flowise"),
        ("prediction_llm_streaming_model_usage_stream", ONE_LLM, "FAKE-LLM: hello flowise"),
        ("prediction_two_llm_usage_stream", TWO_LLMS, "FAKE-LLM: FAKE-LLM: hello flowise"),
        # Its one usageMetadata event is the last node's alone (6/4/10, no cost).
        (
            "prediction_two_llm_streaming_model_usage_stream",
            TWO_LLMS,
            "FAKE-LLM: FAKE-LLM: hello flowise",
        ),
    ],
)
async def test_a_stream_ends_with_the_usage_of_every_llm_node(
    capture: str, usage: Figures, text: str
) -> None:
    events = await streamed(captured_stream(capture))

    assert [e.type for e in events][-1] == "end"
    assert all(e.usage is None for e in events[:-1])
    assert figures(events[-1].usage) == usage
    assert events[-1].text == text
    assert events[-1].session_id == "fixture-session"


async def test_a_stream_without_executed_data_sums_its_usage_metadata_events() -> None:
    raw = (FIXTURES / "flowise/prediction_llm_streaming_model_usage_stream.txt").read_text()
    without = "\n\n".join(
        block for block in raw.split("\n\n") if '"event":"agentFlowExecutedData"' not in block
    )

    def handle(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, text=without, headers={"content-type": "text/event-stream"})

    events = await streamed(handle)

    assert events[-1].usage == Usage(5, 3, 8)  # the event has no cost


@pytest.mark.parametrize("capture", ["prediction_agentflow_stream", "prediction_chatflow"])
async def test_streams_without_usage_end_with_none(capture: str) -> None:
    events = await streamed(always(capture))

    assert events[-1].type == "end"
    assert events[-1].usage is None


async def test_usage_figures_that_are_missing_or_odd_stay_unknown() -> None:
    data = body("flowise", "prediction_two_llm_usage")
    nodes = data["agentFlowExecutedData"][1:]
    first, second = (node["data"]["output"]["usageMetadata"] for node in nodes)
    del first["input_tokens"]  # as Flowise sent it for an LLM call with an empty prompt
    del first["total_cost"]
    second.update(input_tokens=True, total_cost="0.1")

    def handle(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json=data)

    result = await adapter(handle).execute_flow(AGENTFLOW_ID, "q")

    assert result.usage == Usage(None, 7, 18, cost=None)


def test_a_flow_takes_sampling_parameters_only_where_its_api_configuration_allows() -> None:
    record = body("flowise", "chatflows_page1")["data"][0]
    # Captured: the echo agentflow lets callers override its reply message, nothing else.
    assert discovered_flow(record).tunable == ()
    assert "directreplyagentflow" in discovered_flow(record).node_kinds
    config = json.loads(record["apiConfig"])
    config["overrideConfig"]["nodes"]["ChatOpenAI"] = [
        {"name": "temperature", "enabled": True},
        {"name": "maxTokens", "enabled": False},
    ]
    allowed = discovered_flow({**record, "apiConfig": json.dumps(config)})
    assert allowed.tunable == (("temperature", "ChatOpenAI", "temperature"),)
    config["overrideConfig"]["status"] = False  # overrides off for the whole flow
    assert discovered_flow({**record, "apiConfig": json.dumps(config)}).tunable == ()
    sent = FlowiseBackend.tuned({"temperature": 0.2, "max_tokens": 9, "x": 1}, allowed.tunable)
    assert sent == {"temperature": 0.2, "x": 1}  # what it cannot take is not sent

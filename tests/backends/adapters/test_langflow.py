"""The Langflow adapter, replaying responses captured from a real Langflow 1.13."""

from __future__ import annotations

import json
from collections.abc import Callable

import httpx
import pytest

from backends.adapters.base import BackendConfig, Usage
from backends.adapters.langflow import LangflowBackend, run_body
from backends.adapters.traits import unapplied
from backends.errors import (
    BackendAuthenticationError,
    BackendError,
    BackendNotFoundError,
    BackendUnexpectedError,
    BackendValidationError,
)
from tests.captured import FIXTURES, body, response
from tests.httpx_transport import HttpxTransport

CONFIG = BackendConfig(
    id=2,
    name="lf",
    kind="langflow",
    base_url="http://lf.test",
    api_key="sk-SECRET",
    timeout_seconds=5,
)
ECHO_ID = body("langflow", "flow_get")["id"]

Handler = Callable[[httpx.Request], httpx.Response]


def adapter(handler: Handler) -> LangflowBackend:
    return LangflowBackend.build(CONFIG, transport=HttpxTransport(httpx.MockTransport(handler)))


def always(name: str, sent: list[httpx.Request] | None = None) -> Handler:
    def handle(request: httpx.Request) -> httpx.Response:
        if sent is not None:
            sent.append(request)
        return response("langflow", name)

    return handle


async def test_health_check_is_ok_when_every_part_is_ok() -> None:
    assert (await adapter(always("health_check")).health_check()).ok


async def test_health_check_reports_a_failing_part() -> None:
    def degraded(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json={"status": "ok", "chat": "ok", "db": "error"})

    result = await adapter(degraded).health_check()

    assert not result.ok
    assert "db" in result.error


async def test_discovery_pages_through_flows_with_their_data_with_the_key() -> None:
    sent: list[httpx.Request] = []
    pages = {"1": "flows_page1", "2": "flows_page2"}

    def handle(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        return response("langflow", pages[request.url.params["page"]])

    flows = (await adapter(handle).discover_flows()).flows

    assert [(f.name, f.endpoint_name) for f in flows] == [
        ("echo", "echo"),
        ("echo-prompt", "echo-prompt"),
    ]
    assert all(f.deployed for f in flows)
    assert len(sent) == 2
    assert sent[0].headers["x-api-key"] == "sk-SECRET"
    # With each flow's data: where temperature and max_tokens can reach it is read there.
    assert sent[0].url.params["header_flows"] == "false"


async def test_discovery_finds_the_model_components_that_take_sampling_parameters() -> None:
    flows = (await adapter(lambda r: response("langflow", "flows_page_all")).discover_flows()).flows

    tunable = {f.name: f.tunable for f in flows}
    assert tunable["fixture-scratch"] == (
        ("temperature", "OpenAIModel-fake1", "temperature"),
        ("max_tokens", "OpenAIModel-fake1", "max_tokens"),
    )
    assert tunable["echo"] == tunable["echo-prompt"] == ()
    kinds = {f.name: f.node_kinds for f in flows}
    assert kinds["fixture-scratch"] == ("chatinput", "openaimodel", "chatoutput")


def test_temperature_and_max_tokens_become_tweaks_of_the_model_component() -> None:
    tunable = (
        ("temperature", "OpenAIModel-fake1", "temperature"),
        ("max_tokens", "OpenAIModel-fake1", "max_tokens"),
    )
    given = {
        "temperature": 0.3,
        "max_tokens": 42,
        "tweaks": {"OpenAIModel-fake1": {"max_tokens": 7}, "ChatOutput-fake1": {"x": 1}},
    }

    sent = LangflowBackend.tuned(given, tunable)

    assert sent == {  # the caller's own tweak of the same field wins
        "tweaks": {
            "OpenAIModel-fake1": {"temperature": 0.3, "max_tokens": 7},
            "ChatOutput-fake1": {"x": 1},
        }
    }
    assert run_body("q", None, sent)["tweaks"] == sent["tweaks"]
    # A flow without a model component: nothing is sent, and unapplied() names both.
    assert LangflowBackend.tuned({"temperature": 0.3, "max_tokens": 42}, ()) == {}
    assert unapplied({"temperature": 0.3, "max_tokens": 42}, ()) == ["temperature", "max_tokens"]
    assert unapplied({"temperature": 0.3, "max_tokens": 42}, tunable) == []


async def test_discovering_200_flows_costs_two_requests() -> None:
    item = body("langflow", "flows_page1")["items"][0]
    items = [{**item, "id": f"id-{i}", "name": f"flow {i}"} for i in range(200)]
    sent: list[httpx.Request] = []

    def handle(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        page, size = int(request.url.params["page"]), int(request.url.params["size"])
        return httpx.Response(
            200,
            json={
                "items": items[(page - 1) * size : page * size],
                "total": 200,
                "page": page,
                "size": size,
                "pages": 2,
            },
        )

    flows = (await adapter(handle).discover_flows()).flows

    assert len(flows) == 200
    assert len(sent) == 2


async def test_a_run_sends_the_session_and_tweaks_and_reads_the_answer() -> None:
    sent: list[httpx.Request] = []
    tweaks = {"Prompt-echo1": {"template": "Echo: {user_input}"}}

    result = await adapter(always("run_echo_prompt", sent)).execute_flow(
        ECHO_ID, "hello langflow", session_id="fixture-session", parameters={"tweaks": tweaks}
    )

    payload = json.loads(sent[0].content)
    assert payload == {
        "input_value": "hello langflow",
        "input_type": "chat",
        "output_type": "chat",
        "session_id": "fixture-session",
        "tweaks": tweaks,
    }
    assert result.text == "Echo: hello langflow"
    assert result.session_id == "fixture-session"


async def test_streaming_bare_json_events_become_chunks_and_an_end() -> None:
    events = [e async for e in adapter(always("run_stream")).stream_flow(ECHO_ID, "stream me")]

    assert [e.type for e in events] == ["chunk", "end"]
    assert events[0].text == events[1].text
    assert events[1].session_id


async def test_token_events_are_streamed_as_they_come() -> None:
    stream = "\n\n".join(
        json.dumps(e)
        for e in [
            {"event": "token", "data": {"chunk": "Ec"}},
            {"event": "token", "data": {"chunk": "ho"}},
            {"event": "end", "data": {"result": {"session_id": "s", "outputs": []}}},
        ]
    )

    def handle(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, text=stream, headers={"content-type": "text/event-stream"})

    events = [e async for e in adapter(handle).stream_flow(ECHO_ID, "q")]

    assert [(e.type, e.text) for e in events] == [("chunk", "Ec"), ("chunk", "ho"), ("end", "Echo")]


async def test_an_error_inside_a_200_stream_raises_with_the_inner_message() -> None:
    with pytest.raises(BackendUnexpectedError, match="Error running graph"):
        async for _ in adapter(always("run_error_stream")).stream_flow(ECHO_ID, "q"):
            pass


async def test_a_run_error_unwraps_the_json_string_in_detail() -> None:
    with pytest.raises(BackendUnexpectedError) as raised:
        await adapter(always("run_error")).execute_flow(ECHO_ID, "q")

    assert raised.value.message.startswith("Langflow backend 'lf': Error running graph")
    assert raised.value.http_status == 500


@pytest.mark.parametrize(
    ("capture", "error"),
    [
        ("run_no_key", BackendAuthenticationError),
        ("run_bad_key", BackendAuthenticationError),
        ("run_unknown_flow", BackendNotFoundError),
    ],
)
async def test_run_errors_come_out_typed(capture: str, error: type[BackendError]) -> None:
    with pytest.raises(error):
        await adapter(always(capture)).execute_flow(ECHO_ID, "q")


@pytest.mark.parametrize(
    ("capture", "error"),
    [
        ("flows_no_key", BackendAuthenticationError),
        ("flow_get_unknown", BackendNotFoundError),
        ("flow_get_invalid_id", BackendValidationError),
    ],
)
async def test_flow_errors_come_out_typed(capture: str, error: type[BackendError]) -> None:
    with pytest.raises(error) as raised:
        await adapter(always(capture)).get_flow("x")
    assert "sk-SECRET" not in json.dumps(raised.value.as_dict())


async def test_the_flow_lifecycle_calls() -> None:
    sent: list[httpx.Request] = []
    answers = iter(["flow_create", "flow_patch", "flow_delete"])

    def handle(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        return response("langflow", next(answers))

    lf = adapter(handle)
    created = await lf.create_flow(name="fixture-scratch", flow_data={"nodes": [], "edges": []})
    patched = await lf.update_flow(created.id, description="patched by capture_fixtures.py")
    await lf.delete_flow(created.id)

    assert [r.method for r in sent] == ["POST", "PATCH", "DELETE"]
    assert patched.description == "patched by capture_fixtures.py"


# --- what an error tells: Flywheel's words, never a body, never our key -------------------

OPAQUE = BackendConfig(
    id=4, name="lf", kind="langflow", base_url="http://lf.test", api_key="Zq7opaqueKEYvalue"
)


def _opaque(handler: Handler) -> LangflowBackend:
    return LangflowBackend.build(OPAQUE, transport=HttpxTransport(httpx.MockTransport(handler)))


async def test_a_health_answer_names_only_plain_failing_parts() -> None:
    def odd(request: httpx.Request) -> httpx.Response:
        secret = request.headers["x-api-key"]
        return httpx.Response(200, json={"status": "ok", "db": "error", f"<{secret}>": "bad"})

    result = await _opaque(odd).health_check()

    assert not result.ok
    assert result.error == "health check reports not ok: db and 1 more"


async def test_a_health_answer_that_is_not_an_object_is_described() -> None:
    def page(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json=["INTERNAL", request.headers["x-api-key"]])

    result = await _opaque(page).health_check()

    assert result.error.startswith("unexpected health answer (HTTP 200, application/json, ")
    assert "Zq7opaqueKEYvalue" not in result.error
    assert "INTERNAL" not in result.error


@pytest.mark.parametrize(
    "reply",
    [
        lambda key: httpx.Response(500, json={"detail": f"key {key} refused"}),
        lambda key: httpx.Response(502, text=f"upstream said {key}"),
        lambda key: httpx.Response(500, json={"detail": {"message": key, "trace": "x"}}),
        lambda key: httpx.Response(500, json={"unexpected": key}),
    ],
)
async def test_run_errors_never_carry_our_key_or_a_body(reply: Callable) -> None:
    def fail(request: httpx.Request) -> httpx.Response:
        return reply(request.headers["x-api-key"])

    with pytest.raises(BackendError) as raised:
        await _opaque(fail).execute_flow(ECHO_ID, "q")

    assert "Zq7opaqueKEYvalue" not in json.dumps(raised.value.as_dict())
    assert "upstream said" not in raised.value.message


async def test_a_stream_error_that_echoes_our_key_is_scrubbed() -> None:
    def stream(request: httpx.Request) -> httpx.Response:
        event = {
            "event": "error",
            "data": {"error": f"500: bad key {request.headers['x-api-key']}"},
        }
        return httpx.Response(
            200, text=json.dumps(event) + "\n\n", headers={"content-type": "text/event-stream"}
        )

    with pytest.raises(BackendError) as raised:
        async for _ in _opaque(stream).stream_flow(ECHO_ID, "q"):
            pass

    assert "Zq7opaqueKEYvalue" not in raised.value.message
    assert raised.value.message == "Langflow backend 'lf': bad key [redacted]"


@pytest.mark.parametrize("answer", ['"just a string"', "[1, 2]", '{"items": 7}'])
async def test_answers_of_the_wrong_shape_are_backend_errors_not_crashes(answer: str) -> None:
    def odd(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, text=answer, headers={"content-type": "application/json"})

    with pytest.raises(BackendUnexpectedError):
        await adapter(odd).discover_flows()
    if not answer.startswith("{"):
        with pytest.raises(BackendUnexpectedError):
            await adapter(odd).execute_flow(ECHO_ID, "q")


# --- token usage: fixtures captured with OpenAI components on the fake OpenAI server -------
# (scripts/peers/fake_openai.py; flows in tests/peers/langflow-fake-llm-*.json).


@pytest.mark.parametrize(
    ("capture", "usage", "text"),
    [
        ("run_llm_usage", Usage(5, 3, 8), "FAKE-LLM: hello langflow"),
        # Two chained OpenAI components (5 + 6 in, 3 + 4 out): Langflow sums them itself.
        ("run_two_llm_usage", Usage(11, 7, 18), "FAKE-LLM: FAKE-LLM: hello langflow"),
    ],
)
async def test_a_run_reads_the_usage_on_its_chat_output(
    capture: str, usage: Usage, text: str
) -> None:
    result = await adapter(always(capture)).execute_flow(ECHO_ID, "hello langflow")

    assert result.text == text
    assert result.usage == usage  # cost None: Langflow reports none


@pytest.mark.parametrize("capture", ["run_echo", "run_echo_prompt"])
async def test_runs_without_an_llm_have_no_usage_not_zeros(capture: str) -> None:
    assert (await adapter(always(capture)).execute_flow(ECHO_ID, "q")).usage is None


async def test_a_stream_streams_the_tokens_and_ends_with_the_usage() -> None:
    raw = (FIXTURES / "langflow/run_llm_usage_stream.txt").read_text()

    def handle(request: httpx.Request) -> httpx.Response:
        return httpx.Response(
            200, text=raw, headers={"content-type": "text/event-stream; charset=utf-8"}
        )

    events = [e async for e in adapter(handle).stream_flow(ECHO_ID, "hello langflow")]

    assert [(e.type, e.text) for e in events] == [
        ("chunk", "FAKE-LLM:"),
        ("chunk", " hello"),
        ("chunk", " langflow"),
        ("end", "FAKE-LLM: hello langflow"),
    ]
    assert [e.usage for e in events] == [None, None, None, Usage(5, 3, 8)]
    assert events[-1].session_id == "fixture-session"


async def test_a_stream_without_an_llm_ends_without_usage() -> None:
    events = [e async for e in adapter(always("run_stream")).stream_flow(ECHO_ID, "q")]

    assert events[-1].type == "end"
    assert events[-1].usage is None


@pytest.mark.parametrize(
    ("other_source", "usage"),
    [("OpenAIModel-fake1", Usage(5, 3, 8)), ("OpenAIModel-other", Usage(10, 6, 16))],
)
async def test_chat_outputs_are_summed_once_per_producing_component(
    other_source: str, usage: Usage
) -> None:
    data = body("langflow", "run_llm_usage")
    results = data["outputs"][0]["outputs"]
    second = json.loads(json.dumps(results[0]))
    second["component_id"] = "ChatOutput-second"
    second["results"]["message"]["properties"]["source"]["id"] = other_source
    results.append(second)

    def handle(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json=data)

    assert (await adapter(handle).execute_flow(ECHO_ID, "q")).usage == usage

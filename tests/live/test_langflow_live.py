"""The Langflow adapter against a real Langflow 1.13."""

from __future__ import annotations

import json
import uuid
from dataclasses import replace
from pathlib import Path

import pytest

from backends.adapters import build_adapter
from backends.adapters.base import BackendConfig
from backends.adapters.langflow import LangflowBackend
from backends.errors import (
    BackendAuthenticationError,
    BackendConnectionError,
    BackendNotFoundError,
    BackendUnexpectedError,
    BackendValidationError,
)

pytestmark = pytest.mark.live

ECHO_FLOW = json.loads(
    (Path(__file__).parents[1] / "peers" / "langflow-echo-flow.json").read_text()
)
BAD_TEMPLATE = {"tweaks": {"Prompt-echo1": {"template": "broken {"}}}


async def test_health_check_answers(langflow: LangflowBackend) -> None:
    result = await langflow.health_check()

    assert result.ok, result.error


async def test_discovery_finds_the_seeded_flows(langflow: LangflowBackend, peers) -> None:
    flows = {f.external_id: f for f in (await langflow.discover_flows()).flows}

    assert flows[peers["LANGFLOW_ECHO_FLOW_ID"]].endpoint_name == "echo"
    assert flows[peers["LANGFLOW_PROMPT_FLOW_ID"]].endpoint_name == "echo-prompt"


async def test_a_run_answers(langflow: LangflowBackend, peers) -> None:
    echo = await langflow.execute_flow(peers["LANGFLOW_ECHO_FLOW_ID"], "hello live")
    prompt = await langflow.execute_flow(peers["LANGFLOW_PROMPT_FLOW_ID"], "hello live")

    assert echo.text == "hello live"
    assert prompt.text == "Echo: hello live"


async def test_the_session_id_is_kept_across_two_questions(
    langflow: LangflowBackend, peers
) -> None:
    session = f"live-{uuid.uuid4()}"

    first = await langflow.execute_flow(peers["LANGFLOW_ECHO_FLOW_ID"], "one", session_id=session)
    second = await langflow.execute_flow(peers["LANGFLOW_ECHO_FLOW_ID"], "two", session_id=session)

    assert first.session_id == second.session_id == session


async def test_tweaks_reach_the_flow(langflow: LangflowBackend, peers) -> None:
    result = await langflow.execute_flow(
        peers["LANGFLOW_PROMPT_FLOW_ID"],
        "abc",
        parameters={"tweaks": {"Prompt-echo1": {"template": "You said <{user_input}>"}}},
    )

    assert result.text == "You said <abc>"


async def test_streaming_yields_chunks_then_the_end(langflow: LangflowBackend, peers) -> None:
    events = [
        e
        async for e in langflow.stream_flow(
            peers["LANGFLOW_PROMPT_FLOW_ID"], "stream me", session_id="live-stream"
        )
    ]

    assert events[-1].type == "end"
    assert "".join(e.text for e in events if e.type == "chunk") == "Echo: stream me"
    assert events[-1].session_id == "live-stream"


async def test_a_failing_stream_raises_despite_the_200(langflow: LangflowBackend, peers) -> None:
    with pytest.raises(BackendUnexpectedError, match="Prompt"):
        async for _ in langflow.stream_flow(
            peers["LANGFLOW_PROMPT_FLOW_ID"], "x", parameters=BAD_TEMPLATE
        ):
            pass


async def test_a_run_error_is_unexpected_with_the_inner_message(
    langflow: LangflowBackend, peers
) -> None:
    with pytest.raises(BackendUnexpectedError) as raised:
        await langflow.execute_flow(peers["LANGFLOW_PROMPT_FLOW_ID"], "x", parameters=BAD_TEMPLATE)

    assert raised.value.http_status == 500
    assert "Error running graph" in raised.value.message  # unwrapped from the JSON string


async def test_the_flow_lifecycle(langflow: LangflowBackend) -> None:
    name = f"flywheel-live-{uuid.uuid4().hex[:8]}"
    created = await langflow.create_flow(name=name, flow_data=ECHO_FLOW.get("data", ECHO_FLOW))
    try:
        fetched = await langflow.get_flow(created.id)
        updated = await langflow.update_flow(created.id, description="from flywheel")
        answer = await langflow.execute_flow(created.id, "lifecycle")
        listed = {f.id for f in await langflow.list_flows()}
    finally:
        await langflow.delete_flow(created.id)

    assert fetched.name == name
    assert updated.description == "from flywheel"
    assert answer.text == "lifecycle"
    assert created.id in listed
    with pytest.raises(BackendNotFoundError):
        await langflow.get_flow(created.id)


async def test_an_unknown_flow_is_not_found(langflow: LangflowBackend) -> None:
    with pytest.raises(BackendNotFoundError):
        await langflow.execute_flow(str(uuid.uuid4()), "anyone?")


async def test_a_non_uuid_id_is_a_validation_error(langflow: LangflowBackend) -> None:
    with pytest.raises(BackendValidationError) as raised:
        await langflow.get_flow("not-a-uuid")
    assert raised.value.http_status == 422


@pytest.mark.parametrize("api_key", ["", "sk-wrong"])
async def test_a_missing_or_wrong_key_is_an_authentication_error(
    langflow_config: BackendConfig, peers, api_key: str
) -> None:
    adapter = build_adapter(replace(langflow_config, api_key=api_key))
    try:
        with pytest.raises(BackendAuthenticationError) as raised:
            await adapter.execute_flow(peers["LANGFLOW_ECHO_FLOW_ID"], "let me in")
    finally:
        await adapter.aclose()
    assert raised.value.http_status == 403  # Langflow's answer to a missing key


async def test_an_unreachable_server_is_a_connection_error(langflow_config: BackendConfig) -> None:
    adapter = build_adapter(replace(langflow_config, base_url="http://127.0.0.1:1"))
    try:
        with pytest.raises(BackendConnectionError):
            await adapter.discover_flows()
    finally:
        await adapter.aclose()

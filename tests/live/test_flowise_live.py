"""The Flowise adapter against a real Flowise 3.1.4."""

from __future__ import annotations

import json
import uuid
from dataclasses import replace
from pathlib import Path

import pytest

from backends.adapters import build_adapter
from backends.adapters.base import BackendConfig
from backends.adapters.flowise import FlowiseBackend
from backends.errors import (
    BackendAuthenticationError,
    BackendConnectionError,
    BackendNotFoundError,
    BackendRateLimitError,
    BackendTimeoutError,
    BackendValidationError,
)

pytestmark = pytest.mark.live

CHATFLOW_DATA = json.loads(
    (Path(__file__).parents[1] / "peers" / "flowise-echo-chatflow.json").read_text()
)
AGENTFLOW_DATA = json.loads(
    (Path(__file__).parents[1] / "peers" / "flowise-echo-agentflow.json").read_text()
)


async def test_health_check_answers(flowise: FlowiseBackend) -> None:
    result = await flowise.health_check()

    assert result.ok, result.error
    assert result.latency_ms > 0


async def test_discovery_finds_the_seeded_flows(flowise: FlowiseBackend, peers) -> None:
    flows = {f.external_id: f for f in (await flowise.discover_flows()).flows}

    assert flows[peers["FLOWISE_AGENTFLOW_ID"]].flow_type == "AGENTFLOW"
    assert flows[peers["FLOWISE_CHATFLOW_ID"]].flow_type == "CHATFLOW"
    assert flows[peers["FLOWISE_AGENTFLOW_ID"]].deployed is True


@pytest.mark.parametrize("flow_key", ["FLOWISE_AGENTFLOW_ID", "FLOWISE_CHATFLOW_ID"])
async def test_a_prediction_answers(flowise: FlowiseBackend, peers, flow_key: str) -> None:
    result = await flowise.execute_flow(peers[flow_key], "hello live")

    assert result.text == "Echo: hello live"
    assert result.session_id


async def test_the_session_id_is_kept_across_two_questions(flowise: FlowiseBackend, peers) -> None:
    session = f"live-{uuid.uuid4()}"

    first = await flowise.execute_flow(peers["FLOWISE_AGENTFLOW_ID"], "one", session_id=session)
    second = await flowise.execute_flow(peers["FLOWISE_AGENTFLOW_ID"], "two", session_id=session)

    assert first.session_id == second.session_id == session


async def test_streaming_yields_chunks_then_the_end(flowise: FlowiseBackend, peers) -> None:
    events = [
        e
        async for e in flowise.stream_flow(
            peers["FLOWISE_AGENTFLOW_ID"], "stream me", session_id="live-stream"
        )
    ]

    assert [e.type for e in events][-1] == "end"
    assert "".join(e.text for e in events if e.type == "chunk") == "Echo: stream me"
    assert events[-1].text == "Echo: stream me"
    assert events[-1].session_id == "live-stream"


async def test_streaming_a_flow_that_cannot_stream_still_answers(
    flowise: FlowiseBackend, peers
) -> None:
    events = [e async for e in flowise.stream_flow(peers["FLOWISE_CHATFLOW_ID"], "plain")]

    assert events[-1].type == "end"
    assert events[-1].text == "Echo: plain"


async def test_the_chatflow_lifecycle(flowise: FlowiseBackend) -> None:
    name = f"flywheel-live-{uuid.uuid4().hex[:8]}"
    created = await flowise.create_flow(
        name=name, flow_data=CHATFLOW_DATA, flow_type="CHATFLOW", deployed=False
    )
    flow_id = created.id
    try:
        fetched = await flowise.get_flow(flow_id)
        updated = await flowise.update_flow(flow_id, name=f"{name}-renamed")
        deployed = await flowise.deploy_flow(flow_id)
        answer = await flowise.execute_flow(flow_id, "lifecycle")
    finally:
        await flowise.delete_flow(flow_id)

    assert fetched.name == name
    assert isinstance(fetched.flow_data, dict)  # decoded from Flowise's JSON string
    assert updated.name == f"{name}-renamed"
    assert deployed.deployed is True
    assert answer.text == "Echo: lifecycle"
    with pytest.raises(BackendNotFoundError):
        await flowise.get_flow(flow_id)


async def test_deleting_an_unknown_chatflow_is_not_found(flowise: FlowiseBackend) -> None:
    with pytest.raises(BackendNotFoundError):  # Flowise says 500
        await flowise.delete_flow(str(uuid.uuid4()))


async def test_a_non_uuid_id_is_a_validation_error(flowise: FlowiseBackend) -> None:
    with pytest.raises(BackendValidationError) as raised:
        await flowise.get_flow("not-a-uuid")
    assert raised.value.http_status == 400


async def test_bad_flow_data_is_a_validation_error(flowise: FlowiseBackend) -> None:
    with pytest.raises(BackendValidationError):  # Flowise says 500
        # Text that is not JSON, sent as it is: Flowise's own check is what is tested.
        await flowise.create_flow(name="bad", flow_data="not json")  # type: ignore[arg-type]


async def test_a_wrong_key_is_an_authentication_error(flowise_config: BackendConfig) -> None:
    adapter = build_adapter(replace(flowise_config, api_key="wrong-key"))
    try:
        with pytest.raises(BackendAuthenticationError):
            await adapter.discover_flows()
    finally:
        await adapter.aclose()


async def test_an_unknown_route_is_not_found_despite_the_200(
    flowise_config: BackendConfig,
) -> None:
    # Behind a wrong path prefix every API call lands on Flowise's web page (200 HTML).
    adapter = build_adapter(replace(flowise_config, base_url=f"{flowise_config.base_url}/nope"))
    try:
        with pytest.raises(BackendNotFoundError, match="web page"):
            await adapter.discover_flows()
    finally:
        await adapter.aclose()


async def test_the_generator_without_an_llm_is_a_validation_error(
    flowise: FlowiseBackend,
) -> None:
    with pytest.raises(BackendValidationError, match="could not generate"):  # Flowise says 200
        await flowise.generate_flow("a flow that greets", {"name": "noSuchModel"})


async def test_a_stream_that_never_starts_is_a_timeout(flowise_config: BackendConfig) -> None:
    # Flowise accepts a streaming request for an unknown flow and never answers.
    adapter = build_adapter(replace(flowise_config, timeout_seconds=2))
    try:
        with pytest.raises(BackendTimeoutError):
            async for _ in adapter.stream_flow(str(uuid.uuid4()), "hello?"):
                pass
    finally:
        await adapter.aclose()


async def test_an_unreachable_server_is_a_connection_error(flowise_config: BackendConfig) -> None:
    adapter = build_adapter(replace(flowise_config, base_url="http://127.0.0.1:1"))
    try:
        with pytest.raises(BackendConnectionError):
            await adapter.execute_flow(str(uuid.uuid4()), "anyone?")
        assert not (await adapter.health_check()).ok
    finally:
        await adapter.aclose()


async def test_a_tenants_backend_never_reaches_the_peer_on_loopback(
    flowise_config: BackendConfig,
) -> None:
    # A backend a tenant registered may not reach loopback, whatever its URL says.
    adapter = build_adapter(replace(flowise_config, allow_private_addresses=False))
    try:
        with pytest.raises(BackendConnectionError) as raised:
            await adapter.discover_flows()
        probe = await adapter.health_check()
    finally:
        await adapter.aclose()
    assert raised.value.details["failure"] == "address"
    assert not probe.ok
    assert flowise_config.api_key not in probe.error


async def test_a_rate_limited_flow_is_a_rate_limit_error(flowise: FlowiseBackend) -> None:
    api_config = {
        "rateLimit": {"status": True, "limitMax": "1", "limitDuration": "60", "limitMsg": "slow"}
    }
    created = await flowise.create_flow(
        name=f"flywheel-live-limited-{uuid.uuid4().hex[:8]}",
        flow_data=CHATFLOW_DATA,
        flow_type="CHATFLOW",
    )
    try:
        # Flowise reads a flow's rate limit on update (and at start-up), not on create.
        await flowise.put_chatflow(created.id, {"apiConfig": api_config})
        await flowise.execute_flow(created.id, "first")
        with pytest.raises(BackendRateLimitError):
            await flowise.execute_flow(created.id, "second")
    finally:
        await flowise.delete_flow(created.id)

"""The MCP door against the real Flowise and Langflow: seed 003's lifecycle and a
universal_query answered by the peers, all through the SDK's in-process client."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from mcp import Client
from mcp_types import CallToolResult

from agents.auth import KeyCaller
from agents.server import build_server
from backends.adapters.base import BackendConfig
from backends.services import backend_create
from flywheel.models import Tenant
from flywheel.services import api_key_create
from routing.install import defaults_load
from routing.recording.writer import drain
from tests.live.conftest import serve_code_review
from tests.paths import TESTS

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True)]

PEERS = TESTS / "peers"
FLOWISE_ECHO = (PEERS / "flowise-echo-chatflow.json").read_text()  # flowData, as a string
LANGFLOW_ECHO = json.dumps(
    json.loads((PEERS / "langflow-echo-prompt-flow.json").read_text())["data"]
)
LIFECYCLE_SECONDS = 60  # seed 003's SC-006: the full lifecycle in at most 60 s
QUESTION = "Please review my pull request"


def session(raw_key: str, *calls: tuple[str, dict[str, Any]]) -> list[CallToolResult]:
    async def run() -> list[CallToolResult]:
        async with Client(build_server(KeyCaller(raw_key))) as client:
            return [await client.call_tool(name, arguments) for name, arguments in calls]

    try:
        return async_to_sync(run)()
    finally:
        drain()


def ok(result: CallToolResult) -> dict[str, Any]:
    assert not result.is_error, result.content
    assert result.structured_content is not None
    return result.structured_content


@pytest.fixture
def live_key(flowise_config: BackendConfig, langflow_config: BackendConfig, peers) -> str:
    """Both peers registered as the test tenant's own backends (trusted: they listen on
    loopback), discovered and probed; their echo flows serve code review."""
    defaults_load()
    tenant = Tenant.objects.create(name="Live", slug="live")
    for config, name in ((flowise_config, "fw-live"), (langflow_config, "lf-live")):
        backend_create(
            name=name,
            kind=config.kind,
            base_url=config.base_url,
            api_key=config.api_key,
            tenant=tenant,
            trusted=True,
            timeout_seconds=30,
        )
    serve_code_review(peers)
    return api_key_create(tenant=tenant, name="live mcp")[1]


def test_seed_003s_lifecycle_on_the_real_flowise(live_key: str) -> None:
    started = time.monotonic()
    (created,) = session(
        live_key,
        (
            "create_chatflow",
            {"name": "mcp-live-scratch", "flow_data": FLOWISE_ECHO, "backend": "fw-live"},
        ),
    )
    flow_id = ok(created)["id"]
    try:
        got, updated, deployed = session(
            live_key,
            ("get_chatflow", {"chatflow_id": flow_id}),
            ("update_chatflow", {"chatflow_id": flow_id, "name": "mcp-live-renamed"}),
            ("deploy_chatflow", {"chatflow_id": flow_id, "deployed": True}),
        )
        (ran,) = session(
            live_key, ("run_prediction", {"chatflow_id": flow_id, "question": "hello live"})
        )
    finally:
        (deleted,) = session(live_key, ("delete_chatflow", {"chatflow_id": flow_id}))
    elapsed = time.monotonic() - started
    print(f"Flowise lifecycle through MCP: {elapsed:.1f} s")

    assert ok(created)["deployed"] is False
    assert json.loads(ok(got)["flowData"])["nodes"] == json.loads(FLOWISE_ECHO)["nodes"]
    assert ok(updated)["name"] == "mcp-live-renamed"
    assert ok(deployed)["deployed"] is True
    assert "hello live" in ok(ran)["text"]
    assert ok(ran)["routing"]["backend"] == "fw-live"
    assert ok(deleted)["deleted_id"] == flow_id
    assert elapsed < LIFECYCLE_SECONDS


def test_the_langflow_lifecycle_and_its_refused_deployment(live_key: str) -> None:
    (created,) = session(
        live_key,
        (
            "create_chatflow",
            {"name": "mcp-live-lf", "flow_data": LANGFLOW_ECHO, "backend": "lf-live"},
        ),
    )
    flow_id = ok(created)["id"]
    try:
        got, updated, deploy = session(
            live_key,
            ("get_chatflow", {"chatflow_id": flow_id}),
            ("update_chatflow", {"chatflow_id": flow_id, "name": "mcp-live-lf-renamed"}),
            ("deploy_chatflow", {"chatflow_id": flow_id, "deployed": True}),
        )
        (ran,) = session(
            live_key, ("run_prediction", {"chatflow_id": flow_id, "question": "hello langflow"})
        )
    finally:
        (deleted,) = session(live_key, ("delete_chatflow", {"chatflow_id": flow_id}))

    assert (ok(created)["type"], ok(created)["deployed"]) == ("FLOW", True)
    assert json.loads(ok(got)["flowData"])["nodes"]
    assert ok(updated)["name"] == "mcp-live-lf-renamed"
    assert deploy.is_error
    refused = json.loads(deploy.content[0].text)["error"]  # type: ignore[union-attr]
    assert refused["type"] == "ValidationError"
    assert "Langflow" in refused["message"]
    assert refused["details"]["kind"] == "langflow"
    assert "hello langflow" in ok(ran)["text"]
    assert ok(deleted)["deleted_id"] == flow_id


def test_universal_query_is_answered_by_the_real_peers(live_key: str) -> None:
    routed, explicit = session(
        live_key,
        ("universal_query", {"question": QUESTION}),
        ("universal_query", {"question": QUESTION, "backend": "langflow"}),
    )

    assert ok(routed)["answer"] == f"Echo: {QUESTION}"
    assert ok(routed)["routing"]["backend"] == "fw-live"
    assert routed.content[0].text.startswith("✅ **Code Review**")  # type: ignore[union-attr]
    assert ok(explicit)["answer"] == f"Echo: {QUESTION}"
    assert ok(explicit)["routing"]["backend"] == "lf-live"

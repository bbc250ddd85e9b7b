"""Temperature and max_tokens reaching a real Langflow flow's model component.

A flow with an OpenAI component, pointed at the fake OpenAI server
(scripts/peers/fake_openai.py) started here, is created on the real Langflow:
discovery finds its model component, a question's temperature and max_tokens go
to it as tweaks, and the fake server sees them in the chat request the component
made. A flow without a model component answers with a warning naming both.
"""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from backends.adapters import build_adapter, run_sync
from backends.adapters.base import BackendConfig
from chatflows.models import Flow
from chatflows.services import adiscover_all
from flywheel.models import Tenant
from routing.install import defaults_load
from routing.models import RoutingPolicy
from routing.selection import state
from tests.live.conftest import ROOT, register_peers
from tests.live.test_routing_live import ask
from tests.served import free_port, wait_until_up

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True)]

MODEL = "OpenAIModel-fake1"


@pytest.fixture
def fake_llm() -> Iterator[str]:
    """The fake OpenAI server on a free port: its base URL."""
    port = free_port()
    process = subprocess.Popen(  # noqa: S603 - our own interpreter and script
        [sys.executable, "scripts/peers/fake_openai.py", str(port)],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_until_up(f"http://127.0.0.1:{port}/v1/models", process)
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        process.terminate()
        process.wait(timeout=10)


def _flow_pointed_at(base_url: str) -> dict[str, Any]:
    flow = json.loads((ROOT / "tests/peers/langflow-fake-llm-flow.json").read_text())
    data = copy.deepcopy(flow["data"])
    for node in data["nodes"]:
        if node["id"] == MODEL:
            node["data"]["node"]["template"]["openai_api_base"]["value"] = base_url
    return data


@pytest.fixture
def llm_flow(langflow_config: BackendConfig, fake_llm: str, peers) -> Iterator[str]:
    """The fake-LLM flow on the real Langflow, for this test: its id there."""

    async def create() -> str:
        adapter = build_adapter(langflow_config)
        try:
            record = await adapter.create_flow(
                name="flywheel-live-llm", flow_data=_flow_pointed_at(fake_llm)
            )
            return record.id
        finally:
            await adapter.aclose()

    async def delete(flow_id: str) -> None:
        adapter = build_adapter(langflow_config)
        try:
            await adapter.delete_flow(flow_id)
        finally:
            await adapter.aclose()

    flow_id = run_sync(create)
    try:
        yield flow_id
    finally:
        run_sync(delete, flow_id)


def test_temperature_and_max_tokens_reach_the_model_component_of_a_real_flow(
    langflow_config: BackendConfig, llm_flow: str, fake_llm: str, peers
) -> None:
    defaults_load()
    register_peers(langflow_config)
    run_sync(adiscover_all)
    RoutingPolicy.objects.update(exploration=0.0)
    state.forget()
    tenant = Tenant.objects.create(name="Live", slug="live")

    assert Flow.objects.get(external_id=llm_flow).tunable == [
        ["temperature", MODEL, "temperature"],
        ["max_tokens", MODEL, "max_tokens"],
    ]
    body = ask(
        tenant,
        question="hello model",
        flow=llm_flow,
        parameters={"temperature": 0.37, "max_tokens": 42},
    )

    assert body["answer"] == "FAKE-LLM: hello model"
    assert "warnings" not in body
    asked = httpx.get(f"{fake_llm}/_last_request", timeout=5).json()
    assert (asked["temperature"], asked["max_tokens"]) == (0.37, 42)

    echo = ask(
        tenant,
        question="hello echo",
        flow=peers["LANGFLOW_ECHO_FLOW_ID"],
        parameters={"temperature": 0.37, "max_tokens": 42},
    )
    assert echo["answer"] == "hello echo"
    assert [w.split(":")[0] for w in echo["warnings"]] == [
        "temperature was not applied",
        "max_tokens was not applied",
    ]

"""The flow lifecycle over REST against the real servers of `make peers`.

create → get → update → deploy → predict → delete on Flowise, and the
Langflow equivalent (no deployment step), through the same services every
door calls. The MCP door runs the same lifecycle in test_mcp_live.py.
"""

from __future__ import annotations

import json
import time
import uuid

import pytest
from rest_framework.test import APIClient

from backends.adapters.base import BackendConfig
from backends.models import Backend, BackendHealth
from chatflows.models import Flow
from flywheel.models import Tenant
from flywheel.services import api_key_create
from routing.models import RoutingDecision
from routing.recording.writer import drain
from tests.live.conftest import ROOT
from tests.routing_world import refresh

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True)]

FLOWISE_ECHO = (ROOT / "tests" / "peers" / "flowise-echo-chatflow.json").read_text()


def _client(tenant: Tenant) -> APIClient:
    _, raw = api_key_create(tenant=tenant, name="live")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    return client


def _own(tenant: Tenant, config: BackendConfig) -> Backend:
    backend = Backend.objects.create(
        name=config.name,
        kind=config.kind,
        base_url=config.base_url,
        api_key=config.api_key,
        tenant=tenant,
        allow_private_addresses=True,  # loopback peers, registered as staff would
    )
    BackendHealth.objects.create(backend=backend, healthy=True)
    refresh()
    return backend


def test_the_flowise_lifecycle_over_rest(flowise_config: BackendConfig, tenant: Tenant) -> None:
    _own(tenant, flowise_config)
    client = _client(tenant)
    name = f"flywheel-live-{uuid.uuid4().hex[:8]}"
    started = time.monotonic()

    created = client.post("/api/v1/chatflows", {"name": name, "flow_data": FLOWISE_ECHO}, "json")
    assert created.status_code == 201, created.json()
    flow_id = created.json()["id"]
    try:
        got = client.get(f"/api/v1/chatflows/{flow_id}")
        renamed = client.patch(f"/api/v1/chatflows/{flow_id}", {"name": f"{name}-2"}, "json")
        refused = client.post(f"/api/v1/chatflows/{flow_id}/predict", {"question": "hi"}, "json")
        deployed = client.post(f"/api/v1/chatflows/{flow_id}/deploy", {"deployed": True}, "json")
        ran = client.post(
            f"/api/v1/chatflows/{flow_id}/predict", {"question": "hello live"}, "json"
        )
    finally:
        deleted = client.delete(f"/api/v1/chatflows/{flow_id}")
    elapsed = time.monotonic() - started
    drain()

    assert got.status_code == 200
    assert json.loads(got.json()["flowData"]) == json.loads(FLOWISE_ECHO)
    assert renamed.json()["name"] == f"{name}-2"
    assert refused.status_code == 400  # not deployed yet
    assert deployed.json()["deployed"] is True
    assert ran.status_code == 200, ran.json()
    assert ran.json()["answer"] == "Echo: hello live"
    decision = RoutingDecision.objects.get(request_id=ran.json()["request_id"])
    assert decision.routing_method == "explicit"
    assert deleted.json() == {"message": "Chatflow deleted successfully", "deleted_id": flow_id}
    assert Flow.objects.get(external_id=flow_id).removed_at is not None
    assert elapsed < 60


def test_the_langflow_lifecycle_over_rest(langflow_config: BackendConfig, tenant: Tenant) -> None:
    _own(tenant, langflow_config)
    client = _client(tenant)
    echo = json.loads((ROOT / "tests" / "peers" / "langflow-echo-flow.json").read_text())
    name = f"flywheel-live-{uuid.uuid4().hex[:8]}"

    created = client.post(
        "/api/v1/chatflows", {"name": name, "flow_data": json.dumps(echo["data"])}, "json"
    )
    assert created.status_code == 201, created.json()
    flow_id = created.json()["id"]
    try:
        got = client.get(f"/api/v1/chatflows/{flow_id}")
        renamed = client.patch(f"/api/v1/chatflows/{flow_id}", {"name": f"{name}-2"}, "json")
        deploy = client.post(f"/api/v1/chatflows/{flow_id}/deploy", {"deployed": True}, "json")
        ran = client.post(
            f"/api/v1/chatflows/{flow_id}/predict", {"question": "hello langflow"}, "json"
        )
    finally:
        deleted = client.delete(f"/api/v1/chatflows/{flow_id}")

    assert got.status_code == 200
    assert json.loads(got.json()["flowData"])["nodes"]
    assert renamed.json()["name"] == f"{name}-2"
    assert deploy.status_code == 400
    assert "Langflow" in deploy.json()["error"]["message"]
    assert ran.status_code == 200, ran.json()
    assert ran.json()["answer"] == "hello langflow"
    assert deleted.status_code == 200

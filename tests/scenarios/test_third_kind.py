"""A third backend kind is an adapter and a registry line: nothing else changes.

The kind ("fake", tests/fake_kind.py) is written the way a module of
backends/adapters/ would be, and its server is an in-memory stand-in behind
respx, reached through the same HttpClient as every adapter. The
``fake_kind`` fixture adds it to ADAPTERS and takes it out again; beside that
it widens the database's check on ``Backend.kind``, as the migration that
``makemigrations`` writes for a new kind would. No other module is touched:
discovery, health, routing, the chatflow doors and the admin find the kind
through the registry.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from io import StringIO
from typing import Any

import pytest
import respx
from asgiref.sync import async_to_sync
from django.core.management import call_command
from django.db import connection
from django.db.models import CheckConstraint, Q
from django.test import Client, override_settings
from rest_framework.test import APIClient

from backends.adapters import ADAPTERS, build_adapter, kinds
from backends.adapters.base import BackendConfig
from backends.errors import BackendUnsupportedError
from backends.models import Backend, BackendHealth, HealthCheck
from chatflows import lifecycle
from chatflows.models import Flow
from flywheel.models import Tenant
from flywheel.services import api_key_create
from routing.install import defaults_load
from routing.models import RoutingDecision
from routing.recording.writer import drain
from tests.fake_kind import KEY, KIND, REVIEWER, FakeBackend, FakeServer

pytestmark = pytest.mark.django_db(transaction=True)

URL = "http://fake.test"
ECHO_GRAPH = {"nodes": [{"id": "echo"}], "edges": []}
REVIEW = "Please review my pull request"


# --- registering it ----------------------------------------------------------------------


def _kind_check(allowed: Sequence[str]) -> None:
    """Let the database take these kinds, as a migration for a new kind would."""
    current = next(c for c in Backend._meta.constraints if c.name == "backend_kind_valid")
    wanted = CheckConstraint(condition=Q(kind__in=list(allowed)), name=current.name)
    with connection.schema_editor() as editor:
        editor.remove_constraint(Backend, current)
        editor.add_constraint(Backend, wanted)


@pytest.fixture
def fake_kind(transactional_db: None, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setitem(ADAPTERS, KIND, FakeBackend)  # the registry line
    _kind_check(kinds())
    try:
        yield
    finally:
        drain()  # decisions land before their backend goes
        Backend.objects.filter(kind=KIND).delete()
        _kind_check([k for k in kinds() if k != KIND])


@pytest.fixture
def server(fake_kind: None) -> Iterator[FakeServer]:
    fake = FakeServer()
    with respx.mock(assert_all_called=False) as router:
        router.route(host="fake.test").mock(side_effect=fake.handle)
        yield fake


@pytest.fixture
def owner(tenant: Tenant) -> Tenant:
    defaults_load()  # the intents a question is classified into
    return tenant


@pytest.fixture
def client(owner: Tenant) -> APIClient:
    _, raw = api_key_create(tenant=owner, name="third kind")
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    return api


@pytest.fixture
def fk(server: FakeServer, owner: Tenant) -> Backend:
    """The tenant's fake backend, registered through the CLI door, probed and discovered."""
    out = StringIO()
    with override_settings(ONBOARD_NEW_BACKENDS=True):
        call_command(
            "add_backend",
            *("--name", "fk", "--kind", KIND, "--url", URL, "--api-key", KEY),
            *("--tenant", owner.slug),
            stdout=out,
        )
    assert "Registered backend 'fk' (fake at http://fake.test)" in out.getvalue()
    return Backend.objects.get(name="fk", tenant=owner)


def _error(result: Any) -> dict[str, Any]:
    payload = result.json()
    assert set(payload) == {"error"}, payload
    assert set(payload["error"]) == {"type", "message", "details"}
    return dict(payload["error"])


# --- the tests ---------------------------------------------------------------------------


def test_the_registry_builds_its_adapter_and_the_interface_refuses_what_it_cannot_do(
    fake_kind: None,
) -> None:
    config = BackendConfig(id=1, name="fk", kind=KIND, base_url=URL, api_key=KEY)
    adapter = build_adapter(config)

    async def refusals() -> list[BackendUnsupportedError]:
        caught = []
        for call in (
            lambda: adapter.deploy_flow(REVIEWER),
            lambda: adapter.update_flow(REVIEWER, deployed=True),
            lambda: adapter.create_flow(name="n", flow_data=ECHO_GRAPH, flow_type="AGENTFLOW"),
            lambda: adapter.generate_flow("an agent that greets", {}),
        ):
            with pytest.raises(BackendUnsupportedError) as raised:
                await call()
            caught.append(raised.value)
        await adapter.aclose()
        return caught

    caught = async_to_sync(refusals)()

    assert isinstance(adapter, FakeBackend)
    assert [e.message for e in caught] == [
        "Fake backend 'fk' does not support deployment (every Fake flow can run).",
        "Fake backend 'fk' does not support deployment (every Fake flow can run).",
        "Fake backend 'fk' does not support flow types (AGENTFLOW).",
        "Fake backend 'fk' does not support generating flows.",
    ]
    assert {e.details["kind"] for e in caught} == {KIND}


def test_registering_it_probes_its_health_and_discovers_its_flows(
    fk: Backend, server: FakeServer
) -> None:
    flow = Flow.objects.get(backend=fk)

    assert BackendHealth.objects.get(backend=fk).healthy is True
    assert HealthCheck.objects.filter(backend=fk, ok=True).count() == 1
    assert (flow.external_id, flow.name, flow.deployed) == (REVIEWER, "Code review helper", True)
    assert "code-review" in flow.intent_keywords
    assert {r.headers["x-fake-key"] for r in server.requests} == {KEY}


def test_its_health_and_discovery_doors_answer(
    fk: Backend, server: FakeServer, client: APIClient
) -> None:
    server.flows["fk-9"] = {"id": "fk-9", "title": "Haiku corner", "about": "poems"}

    health = client.post(f"/api/v1/backends/{fk.pk}/health-check")
    report = client.post(f"/api/v1/backends/{fk.pk}/discover")
    listed = client.get("/api/v1/flows", {"backend": "fk"})

    assert health.status_code == 200, health.content
    assert health.json()["ok"] is True
    assert report.status_code == 200, report.content
    assert (report.json()["added"], report.json()["unchanged"]) == (1, 1)
    assert {f["name"] for f in listed.json()} == {"Code review helper", "Haiku corner"}
    assert KEY not in health.content.decode() + report.content.decode() + listed.content.decode()


def test_a_question_is_routed_to_it_and_answered(fk: Backend, client: APIClient) -> None:
    auto = client.post("/api/v1/query", {"question": REVIEW}, format="json")
    by_kind = client.post("/api/v1/query", {"question": REVIEW, "backend": KIND}, format="json")

    for result in (auto, by_kind):
        body = result.json()
        assert result.status_code == 200, body
        assert body["answer"] == f"fake: {REVIEW}"
        assert body["routing"]["backend"] == "fk"
        assert KEY not in result.content.decode()
    drain()
    assert RoutingDecision.objects.filter(backend=fk).count() == 2


def test_a_streamed_answer_comes_through_its_stream_flow(fk: Backend, client: APIClient) -> None:
    result = client.post(
        "/api/v1/query", {"question": REVIEW, "parameters": {"stream": True}}, format="json"
    )

    async def read() -> bytes:
        stream = result.streaming_content  # type: ignore[attr-defined]
        return b"".join([chunk async for chunk in stream])

    blocks = [b for b in async_to_sync(read)().decode().split("\n\n") if b]
    assert [b.splitlines()[0] for b in blocks] == ["event: chunk", "event: end"]
    end = json.loads(blocks[-1].splitlines()[1].removeprefix("data: "))
    assert end["routing"]["backend"] == "fk"
    assert end["answer"] == f"fake: {REVIEW}"


def test_the_chatflow_doors_work_on_it(fk: Backend, server: FakeServer, client: APIClient) -> None:
    created = client.post(
        "/api/v1/chatflows?backend=fk",
        {"name": "echo", "flow_data": json.dumps(ECHO_GRAPH)},
        format="json",
    )
    new_id = created.json()["id"]
    listed = client.get("/api/v1/chatflows", {"backend": "fk"})
    fetched = client.get(f"/api/v1/chatflows/{new_id}")
    renamed = client.patch(f"/api/v1/chatflows/{new_id}", {"name": "echo two"}, format="json")
    ran = client.post(f"/api/v1/chatflows/{new_id}/predict", {"question": "hi"}, format="json")
    deleted = client.delete(f"/api/v1/chatflows/{new_id}")

    assert created.status_code == 201, created.content
    assert created.json()["kind"] == KIND
    assert (created.json()["type"], created.json()["deployed"]) == ("FLOW", True)
    assert server.flows.get(new_id) is None  # deleted at the end
    assert [(f["id"], f["type"], f["kind"]) for f in listed.json()] == [
        (REVIEWER, "FLOW", KIND),
        (new_id, "FLOW", KIND),
    ]
    assert fetched.status_code == 200, fetched.content
    assert json.loads(fetched.json()["flowData"]) == ECHO_GRAPH
    assert renamed.status_code == 200, renamed.content
    assert renamed.json()["name"] == "echo two"
    assert renamed.json()["updatedDate"] == "2026-01-02T03:04:05Z"
    assert ran.status_code == 200, ran.content
    assert ran.json()["answer"] == "fake: hi"
    assert deleted.json() == {"message": "Chatflow deleted successfully", "deleted_id": new_id}
    row = Flow.objects.get(backend=fk, external_id=new_id)
    assert (row.name, row.removed_at is not None) == ("echo two", True)
    every = b"".join(r.content for r in (created, listed, fetched, renamed, ran, deleted))
    assert KEY.encode() not in every


def test_the_lifecycle_reads_and_writes_it_like_any_kind(fk: Backend, owner: Tenant) -> None:
    rows = lifecycle.chatflows_list(tenant=owner, backend="fk")
    got = async_to_sync(lifecycle.chatflow_get)(tenant=owner, chatflow_id=REVIEWER)
    updated = async_to_sync(lifecycle.chatflow_update)(
        tenant=owner, chatflow_id=REVIEWER, flow_data=json.dumps(ECHO_GRAPH)
    )

    assert [(r["id"], r["kind"]) for r in rows] == [(REVIEWER, KIND)]
    assert (got["name"], got["type"], got["backend"]) == ("Code review helper", "FLOW", "fk")
    assert updated["flow_id"] == got["flow_id"]
    assert async_to_sync(lifecycle.chatflow_get)(tenant=owner, chatflow_id=REVIEWER, backend="fk")[
        "flowData"
    ] == json.dumps(ECHO_GRAPH)


@override_settings(FLOWISE_GENERATOR_MODEL={"name": "chatOpenAI"})
@pytest.mark.parametrize(
    ("method", "path", "payload", "operation"),
    [
        ("post", f"/api/v1/chatflows/{REVIEWER}/deploy", {"deployed": True}, "deployment"),
        ("patch", f"/api/v1/chatflows/{REVIEWER}", {"deployed": False}, "deployment"),
        (
            "post",
            "/api/v1/chatflows?backend=fk",
            {"name": "n", "flow_data": json.dumps(ECHO_GRAPH), "type": "AGENTFLOW"},
            "flow types (AGENTFLOW)",
        ),
        (
            "post",
            "/api/v1/chatflows/generate?backend=fk",
            {"description": "an agent that answers politely"},
            "generating flows (only Flowise has a generator)",
        ),
    ],
)
def test_what_it_cannot_do_is_a_validation_error_naming_the_kind(
    fk: Backend,
    server: FakeServer,
    client: APIClient,
    method: str,
    path: str,
    payload: dict[str, Any],
    operation: str,
) -> None:
    calls = len(server.requests)

    result = getattr(client, method)(path, payload, format="json")

    error = _error(result)
    assert result.status_code == 400, error
    assert error["type"] == "ValidationError"
    assert error["message"].startswith("Fake backend 'fk' does not support ")
    assert operation in error["message"]
    assert error["details"]["kind"] == KIND
    assert len(server.requests) == calls


def test_the_admin_and_the_api_offer_the_kind(
    fake_kind: None, admin_client: Client, client: APIClient
) -> None:
    page = admin_client.get("/admin/backends/backend/add/")
    # Only the URL is wrong: the kind is one the API takes.
    refused = client.post(
        "/api/v1/backends", {"name": "x", "kind": KIND, "base_url": "nope"}, format="json"
    )

    assert '<option value="fake">Fake</option>' in page.content.decode()
    assert set(_error(refused)["details"]["fields"]) == {"base_url"}
    assert Backend(kind=KIND).get_kind_display() == "Fake"

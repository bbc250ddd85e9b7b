"""REST: PATCH /api/v1/flows/{id}, how routing uses one of the caller's own flows.

The same service as the admin, ``set_flow`` and MCP's ``set_flow_routing``
(chatflows.services.flow_routing_set); only a flow on one of the key's tenant's own
backends may be changed.
"""

from __future__ import annotations

import typing
from typing import Any

import pytest
from rest_framework.test import APIClient

from backends.adapters.records import DiscoveredFlow
from backends.models import Backend
from chatflows.models import Flow, FlowScope
from chatflows.routing_contract import ScopeName
from chatflows.services import flows_sync
from flywheel.models import Tenant

pytestmark = pytest.mark.django_db

DIGEST = "Weekly digest of themes"  # discovery derives "global" from its name


@pytest.fixture
def own_backend(tenant: Tenant) -> Backend:
    return Backend.objects.create(
        name="mine", kind="flowise", base_url="http://mine.test", api_key="sk-x", tenant=tenant
    )


@pytest.fixture
def own_flow(own_backend: Backend) -> Flow:
    flows_sync(backend=own_backend, discovered=[DiscoveredFlow(external_id="d-1", name=DIGEST)])
    return Flow.objects.get(backend=own_backend)


def _patch(client: APIClient, flow_id: int | str, body: Any) -> Any:
    return client.patch(f"/api/v1/flows/{flow_id}", body, format="json")


def _unchanged(flow: Flow) -> None:
    row = Flow.objects.get(pk=flow.pk)
    assert (row.scope, row.scope_edited, row.is_generic, row.intent_keywords) == (
        flow.scope,
        flow.scope_edited,
        flow.is_generic,
        flow.intent_keywords,
    )


def test_the_scope_names_are_the_models() -> None:
    assert list(typing.get_args(ScopeName)) == list(FlowScope.values)


def test_a_scope_set_on_an_own_flow_is_kept_by_discovery(
    api_client: APIClient, own_flow: Flow
) -> None:
    assert (own_flow.scope, own_flow.scope_edited) == ("global", False)

    answer = _patch(api_client, own_flow.pk, {"scope": "local"})

    assert answer.status_code == 200, answer.content
    shown = answer.json()
    assert (shown["id"], shown["scope"], shown["scope_edited"]) == (own_flow.pk, "local", True)
    assert (shown["backend"], shown["name"]) == ("mine", DIGEST)
    flow = Flow.objects.get(pk=own_flow.pk)
    assert (flow.scope, flow.scope_edited) == ("local", True)
    assert (flow.is_generic, flow.intent_keywords) == (False, own_flow.intent_keywords)
    listed = api_client.get("/api/v1/flows", {"backend": "mine"}).json()
    assert [(f["scope"], f["scope_edited"]) for f in listed] == [("local", True)]

    flows_sync(
        backend=own_flow.backend,
        discovered=[DiscoveredFlow(external_id="d-1", name=DIGEST, description="summaries")],
    )

    flow.refresh_from_db()
    assert (flow.scope, flow.scope_edited, flow.description) == ("local", True, "summaries")


def test_generic_and_intents_are_set_together(api_client: APIClient, own_flow: Flow) -> None:
    answer = _patch(
        api_client, own_flow.pk, {"is_generic": True, "intent_keywords": [" Summarize", "qa"]}
    )

    assert answer.status_code == 200, answer.content
    flow = Flow.objects.get(pk=own_flow.pk)
    assert (flow.is_generic, flow.intent_keywords, flow.keywords_edited) == (
        True,
        ["summarize", "qa"],
        True,
    )
    assert (flow.scope, flow.scope_edited) == ("global", False)  # not named: left as it was
    assert answer.json()["intent_keywords"] == ["summarize", "qa"]


def test_a_flow_on_a_shared_backend_is_the_administrators(
    api_client: APIClient, backend: Backend
) -> None:
    shared = Flow.objects.create(backend=backend, external_id="s-1", name="shared")

    answer = _patch(api_client, shared.pk, {"scope": "local"})

    assert answer.status_code == 403, answer.content
    assert answer.json()["error"]["type"] == "PermissionDenied"
    assert set(answer.json()["error"]) == {"type", "message", "details"}
    _unchanged(shared)


@pytest.mark.parametrize("whose", ["unknown", "another tenants", "removed"])
def test_a_flow_the_caller_cannot_see_is_not_found(
    api_client: APIClient, own_flow: Flow, whose: str
) -> None:
    flow_id: int = 999_999
    if whose == "another tenants":
        other = Tenant.objects.create(name="Beta", slug="beta")
        theirs = Backend.objects.create(
            name="theirs", kind="flowise", base_url="http://theirs.test", tenant=other
        )
        flow_id = Flow.objects.create(backend=theirs, external_id="t-1", name="t").pk
    elif whose == "removed":
        Flow.objects.filter(pk=own_flow.pk).update(removed_at="2026-01-01T00:00:00Z")
        flow_id = own_flow.pk

    answer = _patch(api_client, flow_id, {"scope": "local"})

    assert answer.status_code == 404, answer.content
    assert answer.json()["error"]["type"] == "NotFoundError"
    assert Flow.objects.filter(scope_edited=True).count() == 0


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"scope": "wide"}, "scope"),
        ({"scope": "GLOBAL"}, "scope"),
        ({"scope": 1}, "scope"),
        ({"is_generic": "yes"}, "is_generic"),
        ({"intent_keywords": "code-review"}, "intent_keywords"),
        ({"intent_keywords": ["code-review", 3]}, "intent_keywords"),
        ({"intent_keywords": ["x" * 51]}, "intent_keywords"),
        ({"intent_keywords": ["a\x00b"]}, None),  # refused by the JSON parser
        ({"scope": "local", "name": "renamed"}, "name"),
    ],
)
def test_a_bad_value_is_refused_and_changes_nothing(
    api_client: APIClient, own_flow: Flow, body: dict[str, Any], field: str | None
) -> None:
    answer = _patch(api_client, own_flow.pk, body)

    assert answer.status_code == 400, answer.content
    error = answer.json()["error"]
    assert error["type"] == "ValidationError"
    if field is not None:
        assert field in error["details"]["fields"], error
    _unchanged(own_flow)


@pytest.mark.parametrize("body", [{}, {"scope": None}, [], "local"])
def test_nothing_to_set_is_refused(api_client: APIClient, own_flow: Flow, body: Any) -> None:
    answer = _patch(api_client, own_flow.pk, body)

    assert answer.status_code == 400, answer.content
    assert answer.json()["error"]["type"] == "ValidationError"
    _unchanged(own_flow)


def test_an_empty_body_and_a_form_body_are_refused(api_client: APIClient, own_flow: Flow) -> None:
    empty = api_client.patch(f"/api/v1/flows/{own_flow.pk}")
    form = api_client.patch(
        f"/api/v1/flows/{own_flow.pk}",
        "scope=local",
        content_type="application/x-www-form-urlencoded",
    )

    assert empty.status_code == 400, empty.content
    assert empty.json()["error"]["message"].startswith("Say what to set")
    assert form.status_code == 415, form.content
    _unchanged(own_flow)


def test_only_patch_is_served(api_client: APIClient, own_flow: Flow) -> None:
    got = api_client.get(f"/api/v1/flows/{own_flow.pk}")

    assert got.status_code == 405
    assert (
        api_client.patch("/api/v1/flows/abc", {"scope": "local"}, format="json").status_code == 404
    )


def test_a_langflow_flow_shows_the_type_every_door_shows(
    api_client: APIClient, tenant: Tenant
) -> None:
    """Langflow calls its flows WORKFLOW; Flywheel keeps that, and shows FLOW everywhere
    (REST's flow list as MCP's list_chatflows), Langflow having no flow types."""
    backend = Backend.objects.create(
        name="mine-lf", kind="langflow", base_url="http://lf.test", tenant=tenant
    )
    flows_sync(backend=backend, discovered=[DiscoveredFlow("lf-1", "echo", flow_type="WORKFLOW")])

    listed = api_client.get("/api/v1/flows", {"backend": "mine-lf"}).json()

    assert [(f["name"], f["flow_type"]) for f in listed] == [("echo", "FLOW")]
    assert Flow.objects.get(external_id="lf-1").flow_type == "WORKFLOW"

"""REST: /api/v1/backends and /api/v1/flows, scoped by the API key's tenant."""

from __future__ import annotations

import pytest
import respx
from rest_framework.test import APIClient

from backends.models import Backend, HealthCheck
from chatflows.models import Flow
from flywheel.models import Tenant
from flywheel.services import api_key_create
from tests.captured import response

pytestmark = pytest.mark.django_db(transaction=True)

NEW = {"name": "lf", "kind": "langflow", "base_url": "http://lf.test:7860", "api_key": "sk-SECRET"}


def _client_for(tenant: Tenant) -> APIClient:
    _, raw_key = api_key_create(tenant=tenant, name="other")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw_key}")
    return client


@pytest.fixture
def other_client(db) -> APIClient:
    return _client_for(Tenant.objects.create(name="Other", slug="other"))


def test_creating_a_backend_never_echoes_its_key(api_client: APIClient, tenant: Tenant) -> None:
    created = api_client.post("/api/v1/backends", NEW, format="json")

    assert created.status_code == 201, created.content
    assert "sk-SECRET" not in created.content.decode()
    assert created.json()["has_api_key"] is True
    assert created.json()["shared"] is False
    backend = Backend.objects.get(name="lf")
    assert (backend.tenant, backend.api_key) == (tenant, "sk-SECRET")
    listed = api_client.get("/api/v1/backends")
    assert "sk-SECRET" not in listed.content.decode()


def test_bad_backend_input_changes_nothing(api_client: APIClient) -> None:
    bad = api_client.post(
        "/api/v1/backends", {**NEW, "kind": "n8n", "base_url": "nope"}, format="json"
    )

    assert bad.status_code == 400
    error = bad.json()["error"]
    assert error["type"] == "ValidationError"
    assert set(error["details"]["fields"]) == {"kind", "base_url"}
    assert not Backend.objects.exists()


def test_duplicate_names_are_refused_in_the_error_shape(
    api_client: APIClient, backend: Backend
) -> None:
    duplicate = api_client.post(
        "/api/v1/backends", {**NEW, "name": backend.name.upper()}, format="json"
    )

    assert duplicate.status_code == 400
    assert duplicate.json()["error"]["type"] == "ValidationError"
    assert Backend.objects.count() == 1


def test_a_tenant_updates_and_deletes_its_own_backend(api_client: APIClient) -> None:
    backend_id = api_client.post("/api/v1/backends", NEW, format="json").json()["id"]

    patched = api_client.patch(
        f"/api/v1/backends/{backend_id}", {"enabled": False, "api_key": ""}, format="json"
    )
    deleted = api_client.delete(f"/api/v1/backends/{backend_id}")

    assert patched.status_code == 200
    assert patched.json()["enabled"] is False
    assert deleted.status_code == 204
    assert not Backend.objects.exists()


def test_other_tenants_backends_are_invisible(
    api_client: APIClient, other_client: APIClient
) -> None:
    backend_id = api_client.post("/api/v1/backends", NEW, format="json").json()["id"]

    assert other_client.get(f"/api/v1/backends/{backend_id}").status_code == 404
    assert other_client.delete(f"/api/v1/backends/{backend_id}").status_code == 404
    assert other_client.get("/api/v1/backends").json() == []
    assert Backend.objects.filter(pk=backend_id).exists()


def test_shared_backends_are_listed_but_not_editable(
    api_client: APIClient, backend: Backend
) -> None:
    listed = api_client.get("/api/v1/backends").json()
    refused = api_client.patch(f"/api/v1/backends/{backend.pk}", {"weight": 3}, format="json")

    assert [b["name"] for b in listed] == [backend.name]
    assert listed[0]["shared"] is True
    assert refused.status_code == 403
    assert refused.json()["error"]["type"] == "PermissionDenied"
    backend.refresh_from_db()
    assert backend.weight == 1.0


def test_the_api_needs_a_key(db) -> None:
    assert APIClient().get("/api/v1/backends").status_code == 401


@respx.mock
def test_a_health_check_can_be_run_on_demand(api_client: APIClient, backend: Backend) -> None:
    respx.get(f"{backend.base_url}/api/v1/ping").mock(return_value=response("flowise", "ping"))

    result = api_client.post(f"/api/v1/backends/{backend.pk}/health-check")

    assert result.status_code == 200, result.content
    assert result.json()["ok"] is True
    assert HealthCheck.objects.filter(backend=backend, ok=True).count() == 1


@respx.mock
def test_discovery_can_be_run_on_demand_and_flows_listed(
    api_client: APIClient, backend: Backend
) -> None:
    pages = {
        "1": response("flowise", "chatflows_page1"),
        "2": response("flowise", "chatflows_page2"),
    }
    respx.get(f"{backend.base_url}/api/v1/chatflows").mock(
        side_effect=lambda request: pages[request.url.params["page"]]
    )

    report = api_client.post(f"/api/v1/backends/{backend.pk}/discover")
    flows = api_client.get("/api/v1/flows", {"backend": backend.name})

    assert report.status_code == 200, report.content
    assert report.json()["added"] == Flow.objects.count() > 0
    assert {f["name"] for f in flows.json()} == set(Flow.objects.values_list("name", flat=True))
    assert "SECRET" not in flows.content.decode()


def test_flows_can_be_filtered_by_intent(api_client: APIClient, backend: Backend) -> None:
    Flow.objects.create(
        backend=backend, external_id="1", name="Reviewer", intent_keywords=["code-review"]
    )
    Flow.objects.create(backend=backend, external_id="2", name="Anything", is_generic=True)
    Flow.objects.create(
        backend=backend, external_id="3", name="Docs", intent_keywords=["document-qa"]
    )

    flows = api_client.get("/api/v1/flows", {"intent": "code-review"}).json()

    assert sorted(f["name"] for f in flows) == ["Anything", "Reviewer"]


@respx.mock
def test_a_discovery_failure_answers_in_the_error_shape(
    api_client: APIClient, backend: Backend
) -> None:
    respx.get(f"{backend.base_url}/api/v1/chatflows").mock(
        return_value=response("flowise", "wrong_api_key")
    )

    result = api_client.post(f"/api/v1/backends/{backend.pk}/discover")

    assert result.status_code == 502
    error = result.json()["error"]
    assert error["type"] == "AuthenticationError"
    assert error["details"]["backend"] == backend.name
    assert "SECRET" not in result.content.decode()

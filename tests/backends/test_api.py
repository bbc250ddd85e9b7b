"""REST: /api/v1/backends and /api/v1/flows, scoped by the API key's tenant."""

from __future__ import annotations

import socket

import pytest
import respx
from rest_framework.test import APIClient

from backends import addresses
from backends.models import Backend, BackendHealth, HealthCheck
from chatflows.models import Flow
from flywheel.models import Tenant
from flywheel.services import api_key_create
from tests.captured import response

pytestmark = pytest.mark.django_db(transaction=True)

NEW = {"name": "lf", "kind": "langflow", "base_url": "http://lf.test:7860", "api_key": "sk-SECRET"}
# What the test hosts resolve to (a documentation address stands in for a public one).
PUBLIC_DNS = {"lf.test": ["93.184.216.34"], "fw.test": ["93.184.216.35"]}


@pytest.fixture(autouse=True)
def dns(monkeypatch: pytest.MonkeyPatch) -> dict[str, list[str]]:
    """DNS leaves the process: the test hosts resolve to public addresses, others nowhere."""
    table = dict(PUBLIC_DNS)

    def resolve(host: str, port: int) -> list[str]:
        if host not in table:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return table[host]

    monkeypatch.setattr(addresses, "resolve", resolve)
    return table


@pytest.fixture
def own_backend(tenant: Tenant) -> Backend:
    return Backend.objects.create(
        name="fw",
        kind="flowise",
        base_url="http://fw.test",
        api_key="sk-flowise-SECRET-own",
        tenant=tenant,
    )


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
    assert backend.allow_private_addresses is False
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


def test_duplicate_names_of_one_owner_are_refused_in_the_error_shape(
    api_client: APIClient,
) -> None:
    assert api_client.post("/api/v1/backends", NEW, format="json").status_code == 201

    duplicate = api_client.post("/api/v1/backends", {**NEW, "name": "LF"}, format="json")

    assert duplicate.status_code == 409
    assert duplicate.json()["error"]["type"] == "ConflictError"
    assert duplicate.json()["error"]["details"]["fields"]["name"]
    assert Backend.objects.count() == 1


def test_a_tenant_may_reuse_a_name_another_owner_holds(
    api_client: APIClient, other_client: APIClient, backend: Backend
) -> None:
    """Names are unique per owner: no "name exists" error tells one tenant another's names."""
    mine = api_client.post("/api/v1/backends", {**NEW, "name": "LF"}, format="json")
    theirs = other_client.post("/api/v1/backends", NEW, format="json")
    like_shared = api_client.post(
        "/api/v1/backends", {**NEW, "name": backend.name.upper()}, format="json"
    )

    assert (mine.status_code, theirs.status_code, like_shared.status_code) == (201, 201, 201)
    assert Backend.objects.filter(name__iexact="lf").count() == 2
    backend.refresh_from_db()
    assert (backend.tenant, backend.api_key) == (None, "sk-flowise-SECRET-do-not-render")


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
    deleted = api_client.delete(f"/api/v1/backends/{backend.pk}")

    assert [b["name"] for b in listed] == [backend.name]
    assert listed[0]["shared"] is True
    assert deleted.status_code == 403
    assert refused.status_code == 403
    assert refused.json()["error"]["type"] == "PermissionDenied"
    backend.refresh_from_db()
    assert backend.weight == 1.0


def test_the_api_needs_a_key(db) -> None:
    assert APIClient().get("/api/v1/backends").status_code == 401


@respx.mock
def test_a_health_check_can_be_run_on_demand(api_client: APIClient, own_backend: Backend) -> None:
    backend = own_backend
    respx.get(f"{backend.base_url}/api/v1/ping").mock(return_value=response("flowise", "ping"))

    result = api_client.post(f"/api/v1/backends/{backend.pk}/health-check")

    assert result.status_code == 200, result.content
    assert result.json()["ok"] is True
    assert HealthCheck.objects.filter(backend=backend, ok=True).count() == 1


@respx.mock
def test_discovery_can_be_run_on_demand_and_flows_listed(
    api_client: APIClient, own_backend: Backend
) -> None:
    backend = own_backend
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
    api_client: APIClient, own_backend: Backend
) -> None:
    backend = own_backend
    respx.get(f"{backend.base_url}/api/v1/chatflows").mock(
        return_value=response("flowise", "wrong_api_key")
    )

    result = api_client.post(f"/api/v1/backends/{backend.pk}/discover")

    assert result.status_code == 502
    error = result.json()["error"]
    assert error["type"] == "AuthenticationError"
    assert error["details"]["backend"] == backend.name
    assert "SECRET" not in result.content.decode()


# --- what a tenant may send (issue 11, section 4 and 7) -------------------------------


@pytest.mark.parametrize(
    "key", ["sk-a\r\nX-Injected: 1", "sk-a\nb", "sk-\ta", "sk-\x1ba", "sk-\x7fa"]
)
def test_an_api_key_with_control_characters_is_refused(
    api_client: APIClient, own_backend: Backend, key: str
) -> None:
    created = api_client.post("/api/v1/backends", {**NEW, "api_key": key}, format="json")
    patched = api_client.patch(
        f"/api/v1/backends/{own_backend.pk}", {"api_key": key}, format="json"
    )

    for result in (created, patched):
        assert result.status_code == 400
        assert list(result.json()["error"]["details"]["fields"]) == ["api_key"]
    assert Backend.objects.count() == 1
    own_backend.refresh_from_db()
    assert own_backend.api_key == "sk-flowise-SECRET-own"


@pytest.mark.parametrize(
    "path",
    [
        "/api/v1/backends/%C2%B2",  # "²".isdigit() is True
        "/api/v1/backends/%D9%A3",  # an Arabic-Indic three
        "/api/v1/backends/99999999999999999999",  # more than a bigint holds
        "/api/v1/backends/999999999999999999",
        "/api/v1/backends/%C2%B2/health-check",
        "/api/v1/backends/-1",
    ],
)
def test_ids_that_are_not_ours_are_a_404_in_the_error_shape(
    api_client: APIClient, path: str
) -> None:
    for method in ("get", "patch", "delete", "post"):
        result = getattr(api_client, method)(path, {}, format="json")

        assert result.status_code in {404, 405}, (method, result.content)
        if result.status_code == 404:
            assert result.json()["error"]["type"] == "NotFoundError"


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"allow_private_addresses": True}, "allow_private_addresses"),
        ({"tenant": 1}, "tenant"),
        ({"owner": "other"}, "owner"),
        ({"timeout_seconds": 0.05}, "timeout_seconds"),
        ({"timeout_seconds": 601}, "timeout_seconds"),
        ({"weight": -1}, "weight"),
        ({"weight": 101}, "weight"),
        # Schema-typed: DRF alone would store false as 0.0, "yes" as True, 12 as "12".
        ({"weight": False}, "weight"),
        ({"timeout_seconds": "30"}, "timeout_seconds"),
        ({"enabled": "yes"}, "enabled"),
        ({"name": 12}, "name"),
        # Read-only fields are not taken either.
        ({"id": 99}, "id"),
        ({"has_api_key": True}, "has_api_key"),
        ({"shared": True}, "shared"),
        # maxLength counts what is sent, before the key's whitespace is trimmed.
        ({"api_key": "\n" + "k" * 500}, "api_key"),
        # International names go in their xn-- form.
        ({"base_url": "http://fw.test/\u00afn"}, "base_url"),
    ],
)
def test_unknown_fields_and_out_of_range_numbers_are_named(
    api_client: APIClient, own_backend: Backend, body: dict, field: str
) -> None:
    url = f"/api/v1/backends/{own_backend.pk}"
    full = {"name": "fw", "kind": "flowise", "base_url": "http://fw.test"}
    results = [
        api_client.post("/api/v1/backends", {**NEW, **body}, format="json"),
        api_client.put(url, {**full, **body}, format="json"),
        api_client.patch(url, body, format="json"),
    ]

    for result in results:
        assert result.status_code == 400, result.content
        assert field in result.json()["error"]["details"]["fields"]
    assert Backend.objects.count() == 1
    own_backend.refresh_from_db()
    assert (own_backend.allow_private_addresses, own_backend.weight) == (False, 1.0)


# --- what a tenant sees (issue 11, section 5) -----------------------------------------------


def test_a_shared_backend_shows_only_its_name_kind_and_health_state(
    api_client: APIClient, backend: Backend
) -> None:
    Backend.objects.filter(pk=backend.pk).update(base_url="http://admin:hunter2@10.1.2.3:3000")
    BackendHealth.objects.create(
        backend=backend,
        healthy=False,
        latency_ms=12.5,
        consecutive_failures=3,
        last_error="refused at 10.1.2.3",
    )

    listed = api_client.get("/api/v1/backends")
    detail = api_client.get(f"/api/v1/backends/{backend.pk}")

    assert listed.json() == [detail.json()]
    assert detail.json() == {
        "id": backend.pk,
        "name": backend.name,
        "kind": "flowise",
        "shared": True,
        "health": {"healthy": False, "in_cooldown": False},
    }
    for text in (listed.content.decode(), detail.content.decode()):
        assert "10.1.2.3" not in text
        assert "hunter2" not in text


def test_a_tenants_own_backend_shows_its_fields_but_never_user_info(
    api_client: APIClient, own_backend: Backend
) -> None:
    # A row saved before URLs were checked may still carry a password.
    Backend.objects.filter(pk=own_backend.pk).update(base_url="http://me:hunter2@fw.test:3000/x")
    BackendHealth.objects.create(backend=own_backend, healthy=True, latency_ms=3.0)

    shown = api_client.get(f"/api/v1/backends/{own_backend.pk}").json()

    assert shown["base_url"] == "http://fw.test:3000/x"
    assert shown["shared"] is False
    assert shown["has_api_key"] is True
    assert "api_key" not in shown
    assert shown["health"]["latency_ms"] == 3.0
    assert shown["health"]["in_cooldown"] is False


def test_a_refused_body_names_each_field_in_a_list_in_drfs_words(
    api_client: APIClient,
) -> None:
    """The body is a contract (backends/contract.py) that words a refusal as the DRF
    serializer it replaced did, and as the services word theirs: messages in a list."""
    body = {"name": " ", "kind": "n8n", "base_url": "ftp://fw.test", "enabled": None}

    refused = api_client.post(
        "/api/v1/backends", {**body, "weight": 101, "colour": 1}, format="json"
    )

    assert refused.status_code == 400
    assert refused.json()["error"] == {
        "type": "ValidationError",
        "message": "The request is not valid.",
        "details": {
            "fields": {
                "colour": ["Unknown field."],
                "name": ["This field may not be blank."],
                "kind": ['"n8n" is not a valid choice.'],
                "base_url": ["The URL must start with http:// or https://."],
                "enabled": ["This field may not be null."],
                "weight": ["Ensure this value is less than or equal to 100.0."],
            }
        },
    }


def test_names_urls_and_keys_are_stored_trimmed(api_client: APIClient, tenant: Tenant) -> None:
    body = {**NEW, "name": "  lf ", "base_url": " http://lf.test:7860 ", "api_key": "\tsk-1 "}

    created = api_client.post("/api/v1/backends", body, format="json")

    assert created.status_code == 201, created.content
    backend = Backend.objects.get(tenant=tenant)
    assert (backend.name, backend.base_url, backend.api_key) == (
        "lf",
        "http://lf.test:7860",
        "sk-1",
    )

"""What a tenant's backend sends cannot break Flywheel's doors (issue: "Limits").

A backend that promises a billion flows cannot keep discovery asking, through the
discover door or at registration; a flow record that does not fit the Flow row (a
400-character name, a 300-character id, a NUL) is a 502 naming the backend and the
field on the chatflow doors, never a 500, and discovery skips it and counts it.
Backends stand in with records captured from a real Flowise 3.1.4.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import httpx
import pytest
import respx
from django.test import override_settings
from rest_framework.test import APIClient

from backends import addresses
from backends.models import Backend
from chatflows.models import Flow
from flywheel.models import Tenant
from tests.captured import body, response

pytestmark = pytest.mark.django_db(transaction=True)

URL = "http://own.test"
LISTED = body("flowise", "chatflows_page1")["data"][0]
RECORD = body("flowise", "chatflow_get")


@pytest.fixture
def own(tenant: Tenant) -> Backend:
    return Backend.objects.create(name="own", kind="flowise", base_url=URL, tenant=tenant)


def _endless(sent: list[httpx.Request]) -> Callable[[httpx.Request], httpx.Response]:
    """The backend of the issue: 100 new flows on every page, and a billion promised."""

    def handle(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        if len(sent) > 300:
            raise AssertionError("discovery did not stop asking")
        page = request.url.params["page"]
        records = [{**LISTED, "id": f"flow-{page}-{i}"} for i in range(100)]
        return httpx.Response(200, json={"data": records, "total": 1_000_000_000})

    return handle


def _json(payload: Any) -> httpx.Response:
    """A JSON answer as a server writes it: a lone surrogate escaped (``\\ud800``)."""
    content = json.dumps(payload).encode()
    return httpx.Response(200, content=content, headers={"content-type": "application/json"})


def _error(result: Any) -> dict[str, Any]:
    payload = result.json()
    assert set(payload) == {"error"}, payload
    assert set(payload["error"]) == {"type", "message", "details"}
    return payload["error"]


# --- discovery without end --------------------------------------------------------------


@respx.mock
def test_the_discover_door_stops_a_backend_that_never_ends_its_list(
    api_client: APIClient, own: Backend
) -> None:
    sent: list[httpx.Request] = []
    respx.get(f"{URL}/api/v1/chatflows").mock(side_effect=_endless(sent))

    result = api_client.post(f"/api/v1/backends/{own.pk}/discover")

    error = _error(result)
    assert result.status_code == 502
    assert error["type"] == "UnexpectedError"
    assert error["details"]["backend"] == "own"
    assert error["details"]["setting"] == "FLYWHEEL_DISCOVERY_MAX_PAGES"
    assert len(sent) == 100
    assert not Flow.objects.filter(backend=own).exists()  # nothing half-discovered is kept


@respx.mock
def test_registering_a_backend_that_never_ends_its_list_says_why_it_has_no_flows(
    api_client: APIClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(addresses, "resolve", lambda host, port: ["93.184.216.35"])
    respx.get(f"{URL}/api/v1/ping").mock(return_value=response("flowise", "ping"))
    sent: list[httpx.Request] = []
    respx.get(f"{URL}/api/v1/chatflows").mock(side_effect=_endless(sent))

    with override_settings(ONBOARD_NEW_BACKENDS=True, DISCOVERY_MAX_FLOWS=500):
        created = api_client.post(
            "/api/v1/backends",
            {"name": "own", "kind": "flowise", "base_url": URL, "api_key": "sk-SECRET"},
            format="json",
        )

    assert created.status_code == 201, created.content
    flows = created.json()["onboarding"]["flows"]
    assert flows["discovered"] is False
    assert "'own'" in flows["error"]
    assert "FLYWHEEL_DISCOVERY_MAX_FLOWS" in flows["error"]
    assert len(sent) == 5
    assert not Flow.objects.exists()


# --- odd records ------------------------------------------------------------------------

ODDITIES = [
    pytest.param({"name": "n" * 400}, "name", id="a 400-character name"),
    pytest.param({"id": "i" * 300}, "id", id="a 300-character id"),
    pytest.param({"name": "nul \x00 inside"}, "name", id="a NUL in the name"),
    pytest.param({"category": "lone \ud800"}, "description", id="a lone surrogate"),
    pytest.param({"type": "T" * 40}, "type", id="a 40-character type"),
]


@pytest.mark.parametrize(("change", "field"), ODDITIES)
@respx.mock
def test_get_and_patch_of_an_odd_record_answer_502_naming_the_backend_and_field(
    api_client: APIClient, own: Backend, change: dict[str, Any], field: str
) -> None:
    flow = Flow.objects.create(backend=own, external_id=RECORD["id"], name="as it was")
    odd = _json({**RECORD, **change})
    respx.get(f"{URL}/api/v1/chatflows/{RECORD['id']}").mock(return_value=odd)
    respx.put(f"{URL}/api/v1/chatflows/{RECORD['id']}").mock(return_value=odd)

    got = api_client.get(f"/api/v1/chatflows/{RECORD['id']}?backend=own")
    patched = api_client.patch(
        f"/api/v1/chatflows/{RECORD['id']}?backend=own", {"name": "renamed"}, format="json"
    )

    for result in (got, patched):
        error = _error(result)
        assert result.status_code == 502, error
        assert error["type"] == "UnexpectedError"
        assert (error["details"]["backend"], error["details"]["field"]) == ("own", field)
        assert "'own'" in error["message"]
    flow.refresh_from_db()
    assert flow.name == "as it was"
    assert Flow.objects.count() == 1


@respx.mock
def test_flow_data_past_its_limit_is_a_502_on_get(api_client: APIClient, own: Backend) -> None:
    Flow.objects.create(backend=own, external_id=RECORD["id"], name="big")
    respx.get(f"{URL}/api/v1/chatflows/{RECORD['id']}").mock(
        return_value=httpx.Response(200, json=RECORD)
    )

    with override_settings(FLOW_DATA_MAX_BYTES=1024):
        result = api_client.get(f"/api/v1/chatflows/{RECORD['id']}?backend=own")

    error = _error(result)
    assert result.status_code == 502
    assert error["details"]["field"] == "flowData"
    assert error["details"]["setting"] == "FLYWHEEL_FLOW_DATA_MAX_BYTES"


@respx.mock
def test_discovery_keeps_the_good_flows_and_counts_the_skipped(
    api_client: APIClient, own: Backend
) -> None:
    records = [
        {**LISTED, "id": "good-1", "name": "good one"},
        {**LISTED, "id": "long-name", "name": "n" * 400},
        {**LISTED, "id": "i" * 300},
        {**LISTED, "id": "nul-name", "name": "nul \x00 inside"},
        {**LISTED, "id": "good-2", "name": "good two"},
        {**LISTED, "id": "good-2", "name": "good two, listed again"},
    ]
    respx.get(f"{URL}/api/v1/chatflows").mock(
        return_value=_json({"data": records, "total": len(records)})
    )

    result = api_client.post(f"/api/v1/backends/{own.pk}/discover")

    assert result.status_code == 200, result.content
    report = result.json()
    assert (report["added"], report["total"], report["skipped"]) == (2, 2, 3)
    names = set(Flow.objects.filter(backend=own).values_list("name", flat=True))
    assert names == {"good one", "good two"}


@respx.mock
def test_a_record_nested_too_deeply_is_a_502_not_a_500(api_client: APIClient, own: Backend) -> None:
    Flow.objects.create(backend=own, external_id=RECORD["id"], name="deep")
    deep = "[" * 100_000 + "]" * 100_000
    respx.get(f"{URL}/api/v1/chatflows/{RECORD['id']}").mock(
        return_value=httpx.Response(200, text=deep, headers={"content-type": "application/json"})
    )

    result = api_client.get(f"/api/v1/chatflows/{RECORD['id']}?backend=own")

    error = _error(result)
    assert result.status_code == 502
    assert error["details"]["backend"] == "own"

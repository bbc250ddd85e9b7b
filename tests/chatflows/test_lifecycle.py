"""The flow lifecycle over REST (seed 003): validation first, the backend, then the rows.

Backends are mocked with responses captured from the real servers; the
world's two backends are shared, and each test tenant gets its own Flowise
(``mine``) and Langflow (``mine-lf``) to write to.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import httpx
import pytest
import respx
from django.test import override_settings
from rest_framework.test import APIClient

from backends.models import Backend, BackendHealth
from chatflows import snapshot as flows_snapshot
from chatflows.lifecycle import check_backend, check_flow_id, resolve_flow, suggested_name
from chatflows.models import Flow
from flywheel.errors import ValidationError
from flywheel.models import Tenant
from flywheel.services import api_key_create
from routing.models import RoutingDecision, Session
from routing.recording.writer import drain
from tests.captured import body, response
from tests.routing_world import FW_ANSWER, World, refresh

pytestmark = pytest.mark.django_db(transaction=True)

ECHO_FLOW = json.loads(body("flowise", "chatflow_create")["flowData"])
CREATED = body("flowise", "chatflow_create")
LF_CREATED = body("langflow", "flow_create")
MINE = "http://mine.test"
MINE_LF = "http://mine-lf.test"


@dataclass
class Mine:
    """A tenant's own backends, and a client holding the tenant's key."""

    tenant: Tenant
    client: APIClient
    flowise: Backend
    langflow: Backend
    router: respx.MockRouter


def _client(tenant: Tenant) -> APIClient:
    _, raw = api_key_create(tenant=tenant, name="lifecycle")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    return client


@pytest.fixture
def mine(world: World, tenant: Tenant) -> Mine:
    flowise = Backend.objects.create(
        name="mine", kind="flowise", base_url=MINE, api_key="sk-MINE-SECRET", tenant=tenant
    )
    langflow = Backend.objects.create(
        name="mine-lf", kind="langflow", base_url=MINE_LF, api_key="sk-MINE-LF", tenant=tenant
    )
    for backend in (flowise, langflow):
        BackendHealth.objects.create(backend=backend, healthy=True)
    refresh()
    return Mine(tenant, _client(tenant), flowise, langflow, world.router)


def _error(result: object) -> dict:
    payload = result.json()  # type: ignore[attr-defined]
    assert set(payload) == {"error"}, payload
    assert set(payload["error"]) == {"type", "message", "details"}
    return payload["error"]


def _calls(router: respx.MockRouter, host: str) -> int:
    return sum(1 for call in router.calls if call.request.url.host == host)


# --- validation happens before any backend call -----------------------------------------


@pytest.mark.parametrize(
    ("payload", "field", "constraint"),
    [
        ({"name": "", "flow_data": json.dumps(ECHO_FLOW)}, "name", "length"),
        ({"name": "x" * 256, "flow_data": json.dumps(ECHO_FLOW)}, "name", "length"),
        ({"name": "ok", "flow_data": "not json"}, "flow_data", "json"),
        ({"name": "ok", "flow_data": "[1, 2]"}, "flow_data", "object"),
        ({"name": "ok", "flow_data": '{"nodes": []}'}, "flow_data", "nodesAndEdges"),
        ({"name": "ok", "flow_data": "[" * 100_000 + "]" * 100_000}, "flow_data", "json"),
        (
            {"name": "ok", "flow_data": json.dumps({"nodes": ["x" * 1_000_000], "edges": []})},
            "flow_data",
            "maxSize",
        ),
        ({"name": "ok", "flow_data": json.dumps(ECHO_FLOW), "type": "ROBOT"}, "type", "enum"),
        ({"name": "ok", "flow_data": json.dumps(ECHO_FLOW), "deployed": "yes"}, "deployed", "type"),
    ],
)
def test_a_bad_create_is_refused_before_the_backend_is_called(
    mine: Mine, payload: dict, field: str, constraint: str
) -> None:
    rows = Flow.objects.count()

    result = mine.client.post("/api/v1/chatflows?backend=mine", payload, format="json")

    error = _error(result)
    assert result.status_code == 400
    assert error["type"] == "ValidationError"
    assert error["details"]["field"] == field
    assert error["details"]["constraint"] == constraint
    assert _calls(mine.router, "mine.test") == 0
    assert Flow.objects.count() == rows


def test_an_update_with_no_field_and_unknown_fields_are_refused(mine: Mine) -> None:
    flow = Flow.objects.create(backend=mine.flowise, external_id="f-1", name="one")

    empty = mine.client.patch(f"/api/v1/chatflows/{flow.external_id}", {}, format="json")
    unknown = mine.client.patch(
        f"/api/v1/chatflows/{flow.external_id}", {"colour": "red"}, format="json"
    )
    put_half = mine.client.put(
        f"/api/v1/chatflows/{flow.external_id}", {"name": "two"}, format="json"
    )

    assert (empty.status_code, _error(empty)["details"]["constraint"]) == (400, "anyOf")
    assert unknown.status_code == 400
    assert "colour" in _error(unknown)["details"]["fields"]
    assert put_half.status_code == 400
    assert "flow_data" in _error(put_half)["details"]["fields"]
    assert _calls(mine.router, "mine.test") == 0


def test_generate_needs_a_ten_character_description(mine: Mine) -> None:
    result = mine.client.post("/api/v1/chatflows/generate", {"description": "short"}, format="json")

    assert result.status_code == 400
    assert _error(result)["details"]["constraint"] == "minLength"


@pytest.mark.parametrize("blank", ["", "%20", "%09", "%0C", "%0A%20%0B"])
def test_a_blank_backend_names_none_so_it_filters_nothing(
    world: World, api_client: APIClient, blank: str
) -> None:
    # ?backend= is allowEmptyValue: sent empty, or blank once trimmed, it names no backend.
    flow = world.fw_flow.external_id
    world.router.get(f"http://fw.test/api/v1/chatflows/{flow}").mock(
        return_value=response("flowise", "chatflow_get")
    )

    listed = api_client.get(f"/api/v1/chatflows?backend={blank}")
    got = api_client.get(f"/api/v1/chatflows/{flow}?backend={blank}")
    ran = api_client.post(
        f"/api/v1/chatflows/{flow}/predict?backend={blank}", {"question": "hi"}, format="json"
    )
    deploy = api_client.post(f"/api/v1/chatflows/{flow}/deploy?backend={blank}")

    assert listed.status_code == 200, listed.json()
    assert {f["backend"] for f in listed.json()} >= {"fw", "lf"}
    assert got.status_code == 200, got.json()
    assert got.json()["backend"] == "fw"
    assert ran.status_code == 200, ran.json()
    assert deploy.status_code == 403  # found without a backend named; shared: staff only
    assert check_backend(" \t\x0c\n") is None
    assert check_backend(" fw ") == "fw"


# --- writes go to the backend, then the rows follow -------------------------------------


def test_create_sends_the_flow_and_stores_its_row(mine: Mine) -> None:
    route = mine.router.post(f"{MINE}/api/v1/chatflows").mock(
        return_value=response("flowise", "chatflow_create")
    )

    result = mine.client.post(
        "/api/v1/chatflows?backend=mine",
        {"name": "fixture-scratch", "flow_data": json.dumps(ECHO_FLOW)},
        format="json",
    )

    created = result.json()
    assert result.status_code == 201, created
    sent = json.loads(route.calls[0].request.content)
    assert json.loads(sent["flowData"]) == ECHO_FLOW  # Flowise takes flowData as a string
    assert (sent["type"], sent["deployed"]) == ("CHATFLOW", False)
    assert created["id"] == CREATED["id"]
    assert (created["backend"], created["kind"], created["deployed"]) == ("mine", "flowise", False)
    row = Flow.objects.get(pk=created["flow_id"])
    assert (row.backend, row.external_id, row.deployed) == (mine.flowise, CREATED["id"], False)
    assert "SECRET" not in result.content.decode()


def test_a_shared_server_registered_again_by_a_tenant_is_managed_through_its_own(
    world: World, tenant: Tenant
) -> None:
    """The first hour: make run's key cannot manage a shared backend's flows, so its
    tenant registers the same server for itself, and every flow is then on two backends.
    Named by id, a flow was refused ("is on several backends"); it is the tenant's own
    row, writable, and anyone else sees the one server's flow once."""
    flow_id = world.fw_flow.external_id
    again = Backend.objects.create(
        name="my-fw", kind="flowise", base_url=world.fw.base_url + "/", tenant=tenant
    )
    Flow.objects.create(backend=again, external_id=flow_id, name="reviewer", deployed=True)
    other = Backend.objects.create(name="fw-again", kind="flowise", base_url=world.fw.base_url)
    Flow.objects.create(backend=other, external_id=flow_id, name="reviewer", deployed=True)

    assert resolve_flow(tenant=tenant, flow_id=flow_id, write=True).backend == again
    assert resolve_flow(tenant=None, flow_id=flow_id).backend == world.fw  # first by name
    elsewhere = Backend.objects.create(name="a-replica", kind="flowise", base_url=MINE)
    Flow.objects.create(backend=elsewhere, external_id=flow_id, name="reviewer", deployed=True)
    with pytest.raises(ValidationError, match="is on several backends: name one"):
        resolve_flow(tenant=None, flow_id=flow_id)  # two servers: which one is meant?


def test_the_only_backend_of_a_tenant_is_chosen_and_several_must_be_named(
    mine: Mine, world: World
) -> None:
    several = mine.client.post(
        "/api/v1/chatflows", {"name": "n", "flow_data": json.dumps(ECHO_FLOW)}, format="json"
    )
    mine.langflow.delete()
    mine.router.post(f"{MINE}/api/v1/chatflows").mock(
        return_value=response("flowise", "chatflow_create")
    )
    only = mine.client.post(
        "/api/v1/chatflows", {"name": "n", "flow_data": json.dumps(ECHO_FLOW)}, format="json"
    )

    assert several.status_code == 400
    assert "'mine'" in _error(several)["message"]
    assert "'mine-lf'" in _error(several)["message"]
    assert only.status_code == 201
    assert only.json()["backend"] == "mine"


def test_a_langflow_flow_is_created_from_its_data(mine: Mine) -> None:
    route = mine.router.post(f"{MINE_LF}/api/v1/flows/").mock(
        return_value=response("langflow", "flow_create")
    )
    data: dict[str, list[str]] = {"nodes": [], "edges": []}

    result = mine.client.post(
        "/api/v1/chatflows?backend=mine-lf",
        {"name": "fixture-scratch", "flow_data": json.dumps(data)},
        format="json",
    )

    assert result.status_code == 201, result.json()
    assert json.loads(route.calls[0].request.content) == {"name": "fixture-scratch", "data": data}
    assert result.json()["type"] == "FLOW"
    assert result.json()["deployed"] is True
    assert Flow.objects.filter(backend=mine.langflow, external_id=LF_CREATED["id"]).exists()


@pytest.mark.parametrize(
    ("method", "path", "payload", "operation"),
    [
        ("post", "/api/v1/chatflows?backend=mine-lf", {"type": "AGENTFLOW"}, "flow types"),
        ("post", "/api/v1/chatflows?backend=mine-lf", {"deployed": False}, "undeployed"),
        ("post", "/api/v1/chatflows/LF-1/deploy", {"deployed": True}, "deployment"),
        ("patch", "/api/v1/chatflows/LF-1", {"deployed": False}, "deployment"),
        ("post", "/api/v1/chatflows/generate?backend=mine-lf", {}, "generating"),
    ],
)
@override_settings(FLOWISE_GENERATOR_MODEL={"name": "chatOpenAI"})
def test_what_langflow_cannot_do_is_a_validation_error_naming_the_kind(
    mine: Mine, method: str, path: str, payload: dict, operation: str
) -> None:
    Flow.objects.create(backend=mine.langflow, external_id="LF-1", name="lf one", deployed=True)
    if "generate" in path:
        payload = {"description": "an agent that answers politely"}
    elif path.startswith("/api/v1/chatflows?"):
        payload = {"name": "n", "flow_data": json.dumps(ECHO_FLOW), **payload}

    result = getattr(mine.client, method)(path, payload, format="json")

    error = _error(result)
    assert result.status_code == 400, error
    assert error["type"] == "ValidationError"
    assert error["message"].startswith("Langflow backend 'mine-lf'")
    assert operation in error["message"]
    assert _calls(mine.router, "mine-lf.test") == 0


def test_update_and_deploy_change_the_backend_then_the_row(mine: Mine) -> None:
    flow = Flow.objects.create(
        backend=mine.flowise, external_id=CREATED["id"], name="fixture-scratch", deployed=False
    )
    renamed = {**CREATED, "name": "renamed"}
    deployed = {**renamed, "deployed": True}
    route = mine.router.put(f"{MINE}/api/v1/chatflows/{CREATED['id']}").mock(
        side_effect=[httpx.Response(200, json=renamed), httpx.Response(200, json=deployed)]
    )

    patched = mine.client.patch(
        f"/api/v1/chatflows/{CREATED['id']}", {"name": "renamed"}, format="json"
    )
    flow.refresh_from_db()
    name_after_patch = flow.name
    deploy = mine.client.post(f"/api/v1/chatflows/{CREATED['id']}/deploy", {}, format="json")
    flow.refresh_from_db()

    assert patched.status_code == 200
    assert patched.json()["name"] == "renamed"
    assert name_after_patch == "renamed"
    assert json.loads(route.calls[0].request.content) == {"name": "renamed"}
    assert json.loads(route.calls[1].request.content) == {"deployed": True}
    assert deploy.status_code == 200
    assert deploy.json()["deployed"] is True
    assert flow.deployed is True


def test_a_backend_failure_half_way_leaves_the_row_as_it_was(mine: Mine) -> None:
    flow = Flow.objects.create(
        backend=mine.flowise, external_id=CREATED["id"], name="before", deployed=False
    )
    mine.router.put(f"{MINE}/api/v1/chatflows/{CREATED['id']}").mock(
        return_value=httpx.Response(502, text="bad gateway")
    )

    result = mine.client.patch(
        f"/api/v1/chatflows/{CREATED['id']}", {"name": "after", "deployed": True}, format="json"
    )
    flow.refresh_from_db()

    assert result.status_code == 502
    assert (flow.name, flow.deployed, flow.removed_at) == ("before", False, None)


def test_delete_answers_the_deleted_id_and_marks_the_row_removed(mine: Mine) -> None:
    flow = Flow.objects.create(backend=mine.flowise, external_id=CREATED["id"], name="gone")
    mine.router.delete(f"{MINE}/api/v1/chatflows/{CREATED['id']}").mock(
        return_value=response("flowise", "chatflow_delete")
    )

    result = mine.client.delete(f"/api/v1/chatflows/{CREATED['id']}")
    flow.refresh_from_db()

    assert result.status_code == 200
    assert result.json() == {
        "message": "Chatflow deleted successfully",
        "deleted_id": CREATED["id"],
    }
    assert flow.removed_at is not None  # kept: decisions point at it


def test_deleting_what_the_backend_no_longer_has_is_not_found_and_stops_offering_it(
    mine: Mine,
) -> None:
    unknown = "00000000-0000-0000-0000-000000000000"
    flow = Flow.objects.create(backend=mine.flowise, external_id=unknown, name="stale")
    mine.router.delete(f"{MINE}/api/v1/chatflows/{unknown}").mock(
        return_value=response("flowise", "chatflow_delete_unknown")
    )

    result = mine.client.delete(f"/api/v1/chatflows/{unknown}")
    flow.refresh_from_db()

    assert result.status_code == 404
    assert _error(result)["type"] == "NotFoundError"
    assert flow.removed_at is not None


def test_get_shows_flow_data_as_a_string_and_nothing_else_of_the_record(mine: Mine) -> None:
    record = body("flowise", "chatflow_get")
    Flow.objects.create(backend=mine.flowise, external_id=record["id"], name=record["name"])
    mine.router.get(f"{MINE}/api/v1/chatflows/{record['id']}").mock(
        return_value=httpx.Response(
            200, json={**record, "webhookSecret": "whsec-SECRET", "apikeyid": "key-SECRET"}
        )
    )

    result = mine.client.get(f"/api/v1/chatflows/{record['id']}?backend=mine")

    shown = result.json()
    assert result.status_code == 200, shown
    assert json.loads(shown["flowData"]) == json.loads(record["flowData"])
    assert (shown["type"], shown["deployed"]) == ("AGENTFLOW", True)
    assert "SECRET" not in result.content.decode()


# --- tenancy ------------------------------------------------------------------------------


def test_shared_flows_are_readable_by_every_tenant_and_writable_by_staff_only(
    mine: Mine, world: World
) -> None:
    listed = mine.client.get("/api/v1/chatflows")
    write = mine.client.patch(
        f"/api/v1/chatflows/{world.fw_flow.external_id}", {"name": "mine now"}, format="json"
    )
    delete = mine.client.delete(f"/api/v1/chatflows/{world.fw_flow.external_id}")

    assert listed.status_code == 200
    assert {(f["backend"], f["id"]) for f in listed.json()} >= {
        ("fw", world.fw_flow.external_id),
        ("lf", world.lf_flow.external_id),
    }
    assert write.status_code == 403
    assert _error(write)["type"] == "PermissionDenied"
    assert delete.status_code == 403
    assert not world.router.calls  # refused before any call
    world.fw_flow.refresh_from_db()
    assert world.fw_flow.name == "reviewer"
    assert world.fw_flow.removed_at is None


def test_another_tenants_flows_do_not_exist_for_a_key(mine: Mine) -> None:
    flow = Flow.objects.create(backend=mine.flowise, external_id="theirs", name="theirs")
    other = _client(Tenant.objects.create(name="Other", slug="other"))

    listed = other.get("/api/v1/chatflows")
    got = other.get("/api/v1/chatflows/theirs")
    named = other.get("/api/v1/chatflows/theirs?backend=mine")
    ran = other.post("/api/v1/chatflows/theirs/predict", {"question": "hi"}, format="json")

    assert "theirs" not in {f["id"] for f in listed.json()}
    assert got.status_code == 404
    assert named.status_code == 404
    assert ran.status_code == 404
    assert flow.name == "theirs"
    assert _calls(mine.router, "mine.test") == 0


# --- running one given flow ----------------------------------------------------------------


def test_predict_runs_the_flow_and_records_an_explicit_decision(world: World, api_client) -> None:
    result = api_client.post(
        f"/api/v1/chatflows/{world.fw_flow.external_id}/predict",
        {"question": "What is the weather like?"},  # a general question: the flow decides
        format="json",
    )
    drain()

    answer = result.json()
    assert result.status_code == 200, answer
    assert answer["answer"] == FW_ANSWER
    assert answer["routing"]["routing_method"] == "explicit"
    assert answer["routing"]["flow"] == "reviewer"
    decision = RoutingDecision.objects.get(request_id=answer["request_id"])
    assert (decision.routing_method, decision.flow_id) == ("explicit", world.fw_flow.pk)
    assert decision.attempts.count() == 1


@pytest.mark.parametrize("spelt", [int, str, lambda pk: f"00{pk}"], ids=["number", "text", "0-led"])
def test_a_query_may_name_a_flow_by_flywheels_id(world: World, api_client, spelt) -> None:
    # The planner and the database read the id alike: "003" named flow 3 in one and
    # nothing in the other, and the query was answered 503 "cannot run yet".
    result = api_client.post(
        "/api/v1/query",
        {"question": "Review my code", "flow": spelt(world.lf_flow.pk)},
        format="json",
    )

    assert result.status_code == 200, result.json()
    assert result.json()["routing"]["backend"] == "lf"
    assert len(world.lf_route.calls) == 1
    assert not world.fw_route.calls


def test_an_undeployed_chatflow_is_refused(world: World, api_client) -> None:
    Flow.objects.filter(pk=world.fw_flow.pk).update(deployed=False)
    refresh()

    result = api_client.post(
        f"/api/v1/chatflows/{world.fw_flow.external_id}/predict", {"question": "hi"}, format="json"
    )

    error = _error(result)
    assert result.status_code == 400
    assert error["type"] == "ValidationError"
    assert "not deployed" in error["message"]
    assert not world.fw_route.calls


def test_a_named_flow_falls_back_only_when_asked(world: World, api_client) -> None:
    world.fail(world.fw_route)
    path = f"/api/v1/chatflows/{world.fw_flow.external_id}/predict"

    alone = api_client.post(path, {"question": "Review my pull request"}, format="json")
    helped = api_client.post(
        path, {"question": "Review my pull request", "fallback": True}, format="json"
    )

    assert alone.status_code == 502
    assert [a["backend"] for a in _error(alone)["details"]["fallback_chain"]] == ["fw"]
    assert helped.status_code == 200, helped.json()
    chain = helped.json()["routing"]["fallback_chain"]
    assert [a["backend"] for a in chain] == ["fw", "lf"]
    assert helped.json()["routing"]["routing_method"] == "explicit"


# --- generate ------------------------------------------------------------------------------


def test_generate_without_a_configured_model_says_what_to_set(world: World, api_client) -> None:
    result = api_client.post(
        "/api/v1/chatflows/generate", {"description": "an agent that greets people"}, format="json"
    )

    assert result.status_code == 400
    assert _error(result)["details"]["setting"] == "FLOWISE_GENERATOR_MODEL"
    assert not world.router.calls


@override_settings(FLOWISE_GENERATOR_MODEL={"name": "chatOpenAI", "inputs": {"credential": "c1"}})
def test_generate_answers_flow_data_a_name_and_the_description(world: World, api_client) -> None:
    # The generator's answer is a flow's nodes and edges: here those of a real AgentFlow.
    agentflow = json.loads(body("flowise", "chatflow_get")["flowData"])
    route = world.router.post("http://fw.test/api/v1/agentflowv2-generator/generate").mock(
        return_value=httpx.Response(200, json=agentflow)
    )

    result = api_client.post(
        "/api/v1/chatflows/generate",
        {"description": "Create a research agent that summarizes findings"},
        format="json",
    )

    generated = result.json()
    assert result.status_code == 200, generated
    assert set(generated) == {"flowData", "name", "description", "backend"}
    assert json.loads(generated["flowData"]) == {
        "nodes": agentflow["nodes"],
        "edges": agentflow["edges"],
    }
    assert generated["name"] == "Research Agent That Summarizes Findings"
    sent = json.loads(route.calls[0].request.content)
    assert sent["selectedChatModel"] == {"name": "chatOpenAI", "inputs": {"credential": "c1"}}


@override_settings(FLOWISE_GENERATOR_MODEL={"name": "chatOpenAI", "inputs": {"openAIApiKey": "k"}})
def test_the_generator_model_never_goes_to_a_tenants_backend(mine: Mine) -> None:
    result = mine.client.post(
        "/api/v1/chatflows/generate?backend=mine",
        {"description": "an agent that greets people"},
        format="json",
    )

    assert result.status_code == 400
    assert "shared Flowise backends" in _error(result)["message"]
    assert _calls(mine.router, "mine.test") == 0


@override_settings(FLOWISE_GENERATOR_MODEL={"name": "noSuchModel"})
def test_a_generator_without_an_llm_is_a_validation_error(world: World, api_client) -> None:
    world.router.post("http://fw.test/api/v1/agentflowv2-generator/generate").mock(
        return_value=response("flowise", "generator_no_llm")
    )

    result = api_client.post(
        "/api/v1/chatflows/generate", {"description": "an agent that greets people"}, format="json"
    )

    assert result.status_code == 400
    assert "could not generate" in _error(result)["message"]


def test_suggested_names_are_short_titles() -> None:
    assert suggested_name("build me a web search agent") == "Web Search Agent"
    assert suggested_name("!!!") == "Generated"


@pytest.mark.parametrize("flow_id", ["../apikey", "a/b", "x?y=1", "-leading", "", "a" * 201])
def test_a_flow_id_that_could_leave_the_backends_path_is_refused(
    world: World, api_client: APIClient, flow_id: str
) -> None:
    # The id goes into the backend's URL: a tenant may read shared backends' flows, and
    # "../apikey" would read something else of theirs.
    query = api_client.post("/api/v1/query", {"question": "hi", "flow": flow_id}, format="json")
    with pytest.raises(ValidationError) as refused:
        check_flow_id(flow_id)

    assert query.status_code == 400
    assert "flow" in _error(query)["details"]["fields"]
    assert refused.value.details["field"] == "chatflow_id"
    assert not world.router.calls


def test_a_flow_made_a_moment_ago_runs_at_once(world: World, api_client: APIClient) -> None:
    # This process's routing state was read before the flow existed (it is kept ~1 s).
    assert api_client.post("/api/v1/query", {"question": "hi"}, format="json").status_code == 200
    fresh = Flow.objects.create(
        backend=world.fw, external_id="made-just-now", name="new", deployed=True
    )
    flows_snapshot.publish_flows()  # as the lifecycle does after a create or deploy

    result = api_client.post(
        "/api/v1/chatflows/made-just-now/predict", {"question": "hello"}, format="json"
    )

    assert result.status_code == 200, result.json()
    assert result.json()["routing"]["flow"] == fresh.name


def test_a_refused_or_failed_run_leaves_no_session_nobody_can_reach(
    world: World, api_client: APIClient
) -> None:
    world.fail(world.fw_route)
    sessions = Session.objects.count()

    refused = api_client.post("/api/v1/chatflows/no-such-flow/predict", {"question": "hi"}, "json")
    failed = api_client.post(
        f"/api/v1/chatflows/{world.fw_flow.external_id}/predict", {"question": "hi"}, "json"
    )
    drain()

    assert (refused.status_code, failed.status_code) == (404, 502)
    decisions = RoutingDecision.objects.filter(
        request_id__in=[_error(r)["details"]["request_id"] for r in (refused, failed)]
    )
    assert sorted(d.outcome for d in decisions) == ["failed", "rejected"]
    assert all(d.session_id is None for d in decisions)
    assert Session.objects.count() == sessions


def test_a_named_flow_runs_on_a_backend_named_by_id(world: World, api_client) -> None:
    # The chatflow doors name a backend by id or name: the database found backend "<id>"
    # where the planner (names and kinds) found none, and the run was answered 503
    # "cannot run yet".
    flow, backend = world.fw_flow.external_id, str(world.fw.pk)
    query = api_client.post(
        "/api/v1/query", {"question": "Review", "flow": flow, "backend": backend}, format="json"
    )
    predict = api_client.post(
        f"/api/v1/chatflows/{flow}/predict?backend={backend}", {"question": "Review"}, "json"
    )
    routed = api_client.post(
        "/api/v1/query", {"question": "Review my code", "backend": backend}, format="json"
    )

    for result in (query, predict, routed):
        assert result.status_code == 200, result.json()
        assert result.json()["routing"]["backend"] == "fw"
    assert len(world.fw_route.calls) == 3


def test_a_query_naming_no_backend_is_refused_whatever_it_runs(world: World, api_client) -> None:
    for extra in ({}, {"flow": world.fw_flow.external_id}):
        result = api_client.post(
            "/api/v1/query", {"question": "Review", "backend": "999999", **extra}, format="json"
        )

        error = _error(result)
        assert result.status_code == 400, error
        assert error["message"] == "No backend named '999999', of that kind or with that id."
    assert not world.fw_route.calls


def test_a_backend_is_found_by_its_name_before_another_by_its_id(world: World) -> None:
    # As the planner reads a query's backend: a name first, an id last.
    named = Backend.objects.create(
        name=str(world.fw.pk), kind="flowise", base_url="http://named.test"
    )

    assert resolve_flow(tenant=None, flow_id="x", backend=str(world.fw.pk)).backend == named
    assert resolve_flow(tenant=None, flow_id="x", backend=str(world.lf.pk)).backend == world.lf

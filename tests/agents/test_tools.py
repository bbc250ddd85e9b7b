"""The MCP door (agents/): every tool through the SDK's in-process client.

Backends are mocked with responses captured from the real servers (the
routing world's two shared backends, plus each test tenant's own Flowise);
the client validates every structured result against the tool's
outputSchema, so a success here is also a schema check.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import respx
from asgiref.sync import async_to_sync
from django.test import override_settings
from mcp import Client
from mcp_types import CallToolResult
from prometheus_client import REGISTRY

from agents.auth import KeyCaller
from agents.server import build_server
from backends.adapters.records import DiscoveredFlow
from backends.models import Backend, BackendHealth
from chatflows import contract, lifecycle
from chatflows.filters import INTENT
from chatflows.models import Flow
from chatflows.services import flows_sync
from flywheel.links import served_at
from flywheel.models import ApiKey, Tenant
from flywheel.services import api_key_create, api_key_revoke
from routing.models import RoutingDecision
from routing.recording.writer import drain
from tests.captured import body, response
from tests.routing_world import FW_ANSWER, World, refresh

pytestmark = pytest.mark.django_db(transaction=True)

TOOLS = {
    "universal_query",
    "route_query",
    "flowise_query",
    "list_backends",
    "check_backend_health",
    "list_flows",
    "set_flow_routing",
    "list_chatflows",
    "get_chatflow",
    "create_chatflow",
    "update_chatflow",
    "delete_chatflow",
    "run_prediction",
    "deploy_chatflow",
    "generate_agentflow_v2",
    "get_session_history",
    "list_sessions",
}
SEED_003 = {
    "list_chatflows",
    "get_chatflow",
    "create_chatflow",
    "update_chatflow",
    "delete_chatflow",
    "run_prediction",
    "deploy_chatflow",
    "generate_agentflow_v2",
}
REVIEW = "Please review my pull request"
CREATED = body("flowise", "chatflow_create")
ECHO_FLOW = CREATED["flowData"]  # a JSON string, as seed 003 passes flow_data
MINE = "http://mine.test"


# --- helpers ----------------------------------------------------------------------------


def session(raw_key: str, *calls: tuple[str, dict[str, Any]]) -> list[CallToolResult]:
    """Open an in-process MCP client acting as ``raw_key`` and make ``calls`` in order."""

    async def run() -> list[CallToolResult]:
        async with Client(build_server(KeyCaller(raw_key))) as client:
            return [await client.call_tool(name, arguments) for name, arguments in calls]

    try:
        return async_to_sync(run)()
    finally:
        drain()  # decisions are written behind the answers


def call(raw_key: str, tool: str, /, **arguments: Any) -> CallToolResult:
    return session(raw_key, (tool, arguments))[0]


def ok(result: CallToolResult) -> dict[str, Any]:
    assert not result.is_error, result.content
    assert result.structured_content is not None
    return result.structured_content


def text(result: CallToolResult) -> str:
    assert len(result.content) == 1
    return result.content[0].text  # type: ignore[union-attr]


def error(result: CallToolResult) -> dict[str, Any]:
    """The error shape, which is the whole text of a failed call."""
    assert result.is_error
    shaped = json.loads(text(result))
    assert set(shaped) == {"error"}, shaped
    assert set(shaped["error"]) == {"type", "message", "details"}
    return shaped["error"]


def dumped(result: CallToolResult) -> str:
    return result.model_dump_json()


@dataclass
class Mine:
    tenant: Tenant
    key: str
    flowise: Backend
    router: respx.MockRouter


@pytest.fixture
def key(world: World, tenant: Tenant) -> str:
    return api_key_create(tenant=tenant, name="mcp")[1]


@pytest.fixture
def mine(world: World, tenant: Tenant, key: str) -> Mine:
    """The tenant's own Flowise, to manage flows on (shared ones are the admin's)."""
    flowise = Backend.objects.create(
        name="mine", kind="flowise", base_url=MINE, api_key="sk-MINE-SECRET", tenant=tenant
    )
    BackendHealth.objects.create(backend=flowise, healthy=True)
    refresh()
    return Mine(tenant, key, flowise, world.router)


@pytest.fixture
def other_key(db: None) -> str:
    return api_key_create(tenant=Tenant.objects.create(name="Beta", slug="beta"), name="b")[1]


# --- the tools and their schemas ------------------------------------------------------------


def _tools(raw_key: str) -> dict[str, Any]:
    async def run() -> dict[str, Any]:
        async with Client(build_server(KeyCaller(raw_key))) as client:
            return {t.name: t for t in (await client.list_tools()).tools}

    return async_to_sync(run)()


def test_every_tool_is_listed_with_input_and_output_schemas(key: str) -> None:
    tools = _tools(key)

    assert set(tools) == TOOLS
    for tool in tools.values():
        assert tool.description
        assert tool.input_schema["type"] == "object"
        assert tool.output_schema is not None, tool.name
        assert tool.output_schema["type"] == "object", tool.name
        # Claude's API refuses these at the top of an input schema (the whole tool list fails).
        assert not {"anyOf", "oneOf", "allOf"} & set(tool.input_schema), tool.name
    for name in SEED_003:
        backend = tools[name].input_schema["properties"]["backend"]
        assert backend["anyOf"][0] == {"maxLength": 100, "minLength": 1, "type": "string"}
        assert "backend" not in tools[name].input_schema.get("required", [])


def test_the_input_schemas_carry_the_seeds_constraints(key: str) -> None:
    tools = {name: t.input_schema for name, t in _tools(key).items()}

    query = tools["universal_query"]
    assert query["required"] == ["question"]
    assert query["properties"]["question"]["minLength"] == 1
    assert query["properties"]["backend"]["maxLength"] == 100
    assert query["properties"]["backend"]["default"] == "auto"
    assert query["properties"]["include_routing_metadata"]["default"] is True
    temperature = query["properties"]["parameters"]["properties"]["temperature"]
    assert (temperature["minimum"], temperature["maximum"]) == (0, 2)
    assert query["properties"]["session_id"]["anyOf"][0]["format"] == "uuid"
    create = tools["create_chatflow"]
    assert create["required"] == ["name", "flow_data"]
    assert (
        create["properties"]["name"]["minLength"],
        create["properties"]["name"]["maxLength"],
    ) == (
        1,
        255,
    )
    assert create["properties"]["type"]["enum"] == list(contract.CHATFLOW_TYPES)
    assert create["properties"]["type"]["default"] == "CHATFLOW"
    assert tools["get_chatflow"]["properties"]["chatflow_id"]["minLength"] == 1
    assert tools["run_prediction"]["required"] == ["chatflow_id", "question"]
    assert tools["deploy_chatflow"]["required"] == ["chatflow_id", "deployed"]
    assert tools["update_chatflow"]["required"] == ["chatflow_id"]
    assert tools["generate_agentflow_v2"]["properties"]["description"]["minLength"] == 10
    assert tools["get_session_history"]["required"] == ["session_id"]
    assert tools["list_sessions"]["properties"]["limit"]["maximum"] == 500


def test_lists_are_wrapped_under_result_as_the_sdk_does(key: str) -> None:
    tools = _tools(key)

    for name in ("list_backends", "list_flows", "list_chatflows", "list_sessions"):
        schema = tools[name].output_schema
        assert schema["required"] == ["result"], name
        assert schema["properties"]["result"]["type"] == "array"
    chatflow = tools["get_chatflow"].output_schema
    assert {"id", "name", "type", "deployed", "flowData"} <= set(chatflow["required"])


# --- universal_query and route_query ---------------------------------------------------------


def test_universal_query_answers_in_seed_000s_format(world: World, key: str) -> None:
    result = call(key, "universal_query", question=REVIEW)

    answer = ok(result)
    assert answer["answer"] == FW_ANSWER
    assert answer["routing"]["intent"] == "code-review"
    assert answer["routing"]["backend"] == "fw"
    lines = text(result).splitlines()
    assert lines[0] == "✅ **Code Review**"
    assert FW_ANSWER in text(result)
    info = lines[lines.index("**Routing Info**:") :]
    assert info[1] == "- Backend: fw"
    assert info[2] == "- Flow: reviewer"
    assert info[3].startswith("- Selection: Intelligent (score: 0.")
    assert info[4].startswith("- Execution: ")
    assert info[4].endswith("ms")
    assert info[5] == f"- Session: {answer['session_id']}"
    # Why the intent, in words, after seed 000's lines.
    assert info[6] == f"- Why code-review: {answer['routing']['evidence']['summary']}"
    assert info[6].startswith("- Why code-review: matched 'my pull request' and 'review'")
    assert lines[lines.index("**Routing Info**:") - 2] == "---"
    assert RoutingDecision.objects.get().request_id.hex == answer["request_id"].replace("-", "")


def test_without_routing_metadata_the_text_is_the_answer_alone(world: World, key: str) -> None:
    result = call(key, "universal_query", question=REVIEW, include_routing_metadata=False)

    assert text(result) == FW_ANSWER
    assert "routing" not in ok(result)


def test_a_parameter_the_flow_could_not_take_is_said_in_both_formats(
    world: World, key: str
) -> None:
    result = call(key, "universal_query", question=REVIEW, parameters={"max_tokens": 10})

    warning = ok(result)["warnings"][0]
    assert warning.startswith("max_tokens was not applied: flow 'reviewer' on fw")
    assert text(result).splitlines()[-1] == f"⚠️ {warning}"
    bare = call(
        key,
        "universal_query",
        question=REVIEW,
        parameters={"max_tokens": 10},
        include_routing_metadata=False,
    )
    assert text(bare) == f"{FW_ANSWER}\n\n⚠️ {warning}"


def test_an_explicit_backend_is_shown_as_explicit_selection(world: World, key: str) -> None:
    result = call(key, "universal_query", question=REVIEW, backend="lf")

    assert ok(result)["routing"]["backend"] == "lf"
    assert "- Selection: Explicit (score: " in text(result)


def test_flowise_query_asks_flowise_only_as_seed_000s_agents_expect(world: World, key: str) -> None:
    """Agents written for seed 000's flowise_query keep working: its questions go to
    Flowise backends only (the tool did not exist)."""
    answered = ok(call(key, "flowise_query", question=REVIEW))
    world.fail(world.fw_route)
    refused = call(key, "flowise_query", question="Please review my other pull request")

    assert answered["routing"]["backend"] == "fw"
    assert answered["answer"] == FW_ANSWER
    assert refused.is_error
    assert json.loads(text(refused))["error"]["type"] == "AllBackendsFailed"
    assert not world.lf_route.called  # Langflow is never asked, even when Flowise fails


@override_settings(PUBLIC_URL="https://flywheel.example")
def test_the_trace_url_is_a_link_when_the_public_url_is_known(world: World, key: str) -> None:
    answer = ok(call(key, "universal_query", question=REVIEW))

    assert answer["trace_url"] == f"https://flywheel.example/decisions/{answer['request_id']}"


def test_the_trace_url_is_where_make_run_serves_when_no_public_url_is_set(
    world: World, key: str, settings: Any, tmp_path: Path
) -> None:
    settings.VAR_DIR = tmp_path
    assert ok(call(key, "universal_query", question=REVIEW))["trace_url"].startswith("/")
    served_at("127.0.0.1", 8001)

    answer = ok(call(key, "universal_query", question=REVIEW))

    assert answer["trace_url"] == f"http://127.0.0.1:8001/decisions/{answer['request_id']}"
    assert answer["session_url"] == f"http://127.0.0.1:8001/v/{answer['session_id']}/"


def test_a_conversation_continues_and_its_history_and_list_show_it(world: World, key: str) -> None:
    first = ok(call(key, "universal_query", question=REVIEW))
    sid = first["session_id"]
    second = ok(call(key, "universal_query", question="Review this diff too", session_id=sid))

    history, listed = session(
        key, ("get_session_history", {"session_id": sid}), ("list_sessions", {})
    )

    assert second["session_id"] == sid
    turns = ok(history)["turns"]
    assert [t["question"] for t in turns] == [REVIEW, "Review this diff too"]
    assert turns[0]["backend"] == "fw"
    assert text(history).startswith(f"Session {sid}: 2 turns")
    (summary,) = ok(listed)["result"]
    assert (summary["id"], summary["turn_count"], summary["first_question"]) == (sid, 2, REVIEW)


def test_route_query_is_a_dry_run(world: World, key: str) -> None:
    result = call(key, "route_query", question=REVIEW)

    plan = ok(result)
    assert plan["intent"] == "code-review"
    assert plan["selected"]["backend"] == "fw"
    assert [c["backend"] for c in plan["candidates"]][:1] == ["fw"]
    assert "Dry run" in text(result)
    assert not world.fw_route.calls
    drain()
    assert not RoutingDecision.objects.exists()


def test_every_call_is_counted_for_metrics_by_its_outcome(world: World, key: str) -> None:
    def count(status: str) -> float:
        labels = {"door": "mcp", "status": status}
        return REGISTRY.get_sample_value("flywheel_requests_total", labels) or 0.0

    before = count("ok"), count("ValidationError"), count("NotFoundError")

    session(
        key,
        ("route_query", {"question": REVIEW}),
        ("route_query", {"question": ""}),
        ("no_such_tool", {}),
    )

    after = count("ok"), count("ValidationError"), count("NotFoundError")
    assert [a - b for a, b in zip(after, before, strict=True)] == [1, 1, 1]


async def test_several_calls_are_answered_concurrently(world: World, key: str) -> None:
    """Five questions are all in flight at once: each backend call waits until all five
    have arrived (it would wait for ever were the calls served one by one)."""
    arrived = 0
    all_in = asyncio.Event()

    async def slow_backend(request: httpx.Request) -> httpx.Response:
        nonlocal arrived
        arrived += 1
        if arrived == 5:
            all_in.set()
        await asyncio.wait_for(all_in.wait(), timeout=10)
        return response("flowise", "prediction_agentflow")

    world.fw_route.mock(side_effect=slow_backend)
    async with Client(build_server(KeyCaller(key))) as client:
        results = await asyncio.gather(
            *(client.call_tool("universal_query", {"question": REVIEW}) for _ in range(5))
        )

    assert [r.structured_content["answer"] for r in results] == [FW_ANSWER] * 5
    assert arrived == 5


# --- backends and flows ---------------------------------------------------------------------


def test_list_backends_shows_what_rest_shows_and_never_a_key(mine: Mine) -> None:
    result = call(mine.key, "list_backends")

    rows = {b["name"]: b for b in ok(result)["result"]}
    assert set(rows) == {"fw", "lf", "mine"}
    assert set(rows["fw"]) == {"id", "name", "kind", "shared", "health"}
    assert rows["fw"]["shared"] is True
    assert rows["mine"]["has_api_key"] is True
    assert rows["mine"]["base_url"] == MINE
    assert "api_key" not in rows["mine"]
    assert "SECRET" not in dumped(result)
    assert "- mine (id " in text(result)


def test_a_backends_owner_may_check_its_health_now(mine: Mine) -> None:
    mine.router.get(f"{MINE}/api/v1/ping").mock(return_value=response("flowise", "ping"))

    result = call(mine.key, "check_backend_health", backend_id=mine.flowise.pk)

    outcome = ok(result)
    assert (outcome["backend"], outcome["ok"]) == ("mine", True)
    assert text(result).startswith("mine: healthy")


def test_health_checks_of_shared_or_unknown_backends_are_refused(
    mine: Mine, world: World, other_key: str
) -> None:
    shared, unknown = session(
        mine.key,
        ("check_backend_health", {"backend_id": world.fw.pk}),
        ("check_backend_health", {"backend_id": 999999}),
    )
    theirs = call(other_key, "check_backend_health", backend_id=mine.flowise.pk)

    assert error(shared)["type"] == "PermissionDenied"
    assert error(unknown)["type"] == "NotFoundError"
    assert error(theirs)["type"] == "NotFoundError"  # another tenant's: no existence leak
    assert not world.router.calls


def test_list_flows_filters_by_intent(world: World, key: str) -> None:
    every, reviewing = session(
        key, ("list_flows", {}), ("list_flows", {"intent": "creative-orientation"})
    )

    assert {f["name"] for f in ok(every)["result"]} == {"reviewer", "echo", "anything"}
    assert {f["name"] for f in ok(reviewing)["result"]} == {"anything"}  # the generic one
    assert "3 flows:" in text(every)


def test_the_lists_take_and_refuse_what_their_rest_doors_do(world: World, key: str) -> None:
    """list_flows and list_sessions publish their REST doors' contracts (chatflows/filters.py,
    routing/answering/sessions.py) and are refused in the same words."""
    tools = {name: t.input_schema for name, t in _tools(key).items()}
    bad_intent, bad_limit, empty_intent = session(
        key,
        ("list_flows", {"intent": "Code Review"}),
        ("list_sessions", {"limit": 0}),
        ("list_flows", {"intent": ""}),
    )

    assert tools["list_flows"]["properties"]["intent"]["anyOf"][0]["pattern"] == INTENT
    assert error(bad_intent) == {
        "type": "ValidationError",
        "message": "The intent filter is not valid.",
        "details": {"fields": {"intent": "Must be an intent slug such as 'code-review'."}},
    }
    assert error(bad_limit) == {
        "type": "ValidationError",
        "message": "The limit parameter is not valid.",
        "details": {"fields": {"limit": "Must be an integer from 1 to 500."}},
    }
    assert len(ok(empty_intent)["result"]) == 3  # an empty filter is no filter, as on REST


def test_set_flow_routing_sets_an_own_flows_scope_kept_by_discovery(mine: Mine) -> None:
    own = Flow.objects.create(backend=mine.flowise, external_id="own-1", name="Weekly digest")

    result = call(mine.key, "set_flow_routing", flow_id=own.pk, scope="local", is_generic=True)
    flows_sync(
        backend=mine.flowise,
        discovered=[DiscoveredFlow(external_id="own-1", name="Weekly digest of themes")],
    )

    shown = ok(result)
    assert (shown["id"], shown["scope"], shown["scope_edited"], shown["is_generic"]) == (
        own.pk,
        "local",
        True,
        True,
    )
    assert text(result).startswith(f"Flow updated: Weekly digest (id {own.pk}, mine, ")
    assert "scope: local (set by hand)" in text(result)
    flow = Flow.objects.get(pk=own.pk)
    assert (flow.scope, flow.scope_edited, flow.is_generic) == ("local", True, True)
    assert flow.name == "Weekly digest of themes"  # discovery ran, and kept the scope
    listed = ok(call(mine.key, "list_flows", backend="mine"))["result"]
    assert set(listed[0]) == set(shown)  # shown as list_flows shows one
    assert [(f["id"], f["scope"], f["scope_edited"]) for f in listed] == [(own.pk, "local", True)]


def test_set_flow_routing_changes_only_the_callers_own_flows(
    world: World, mine: Mine, other_key: str
) -> None:
    own = Flow.objects.create(backend=mine.flowise, external_id="own-1", name="own")

    shared, unknown, theirs = (
        *session(
            mine.key,
            ("set_flow_routing", {"flow_id": world.fw_flow.pk, "scope": "local"}),
            ("set_flow_routing", {"flow_id": 999999, "scope": "local"}),
        ),
        call(other_key, "set_flow_routing", flow_id=own.pk, scope="local"),
    )

    assert error(shared)["type"] == "PermissionDenied"
    assert error(unknown)["type"] == "NotFoundError"
    assert error(theirs)["type"] == "NotFoundError"  # another tenant's: no existence leak
    assert not Flow.objects.filter(scope_edited=True).exists()


def test_set_flow_routing_refuses_what_the_rest_door_refuses(mine: Mine) -> None:
    own = Flow.objects.create(backend=mine.flowise, external_id="own-1", name="own")
    schema = _tools(mine.key)["set_flow_routing"].input_schema

    bad_scope, bad_keywords, nothing, bad_id = session(
        mine.key,
        ("set_flow_routing", {"flow_id": own.pk, "scope": "wide"}),
        ("set_flow_routing", {"flow_id": own.pk, "intent_keywords": ["a\x00b"]}),
        ("set_flow_routing", {"flow_id": own.pk}),
        ("set_flow_routing", {"flow_id": 0, "scope": "local"}),
    )

    assert schema["required"] == ["flow_id"]
    assert schema["properties"]["flow_id"]["type"] == "integer"
    assert schema["properties"]["scope"]["anyOf"][0]["enum"] == ["global", "local", "any"]
    assert schema["properties"]["is_generic"]["anyOf"][0]["type"] == "boolean"
    assert schema["properties"]["intent_keywords"]["anyOf"][0]["items"]["type"] == "string"
    assert error(bad_scope) == {
        "type": "ValidationError",
        "message": "The flow's routing settings are not valid.",
        "details": {"fields": {"scope": "Must be one of global, local, any."}},
    }
    assert set(error(bad_keywords)["details"]["fields"]) == {"intent_keywords"}
    assert error(nothing)["message"].startswith("Say what to set")
    assert error(bad_id)["type"] == "ValidationError"
    flow = Flow.objects.get(pk=own.pk)
    assert (flow.scope, flow.scope_edited, flow.intent_keywords) == ("any", False, [])


# --- the chatflow lifecycle (seed 003) -------------------------------------------------------


def test_the_lifecycle_create_get_update_deploy_run_delete(mine: Mine) -> None:
    flow_id = CREATED["id"]
    mine.router.post(f"{MINE}/api/v1/chatflows").mock(
        return_value=response("flowise", "chatflow_create")
    )
    mine.router.get(f"{MINE}/api/v1/chatflows/{flow_id}").mock(
        return_value=httpx.Response(200, json={**CREATED, "apikeyid": "key-SECRET"})
    )
    renamed = {**CREATED, "name": "renamed"}
    mine.router.put(f"{MINE}/api/v1/chatflows/{flow_id}").mock(
        side_effect=[
            httpx.Response(200, json=renamed),
            httpx.Response(200, json={**renamed, "deployed": True}),
        ]
    )
    mine.router.post(url__regex=rf"{MINE}/api/v1/prediction/.*").mock(
        return_value=response("flowise", "prediction_chatflow")
    )
    mine.router.delete(f"{MINE}/api/v1/chatflows/{flow_id}").mock(
        return_value=response("flowise", "chatflow_delete")
    )

    created, got, updated, deployed = session(
        mine.key,
        ("create_chatflow", {"name": "fixture-scratch", "flow_data": ECHO_FLOW, "backend": "mine"}),
        ("get_chatflow", {"chatflow_id": flow_id}),
        ("update_chatflow", {"chatflow_id": flow_id, "name": "renamed"}),
        ("deploy_chatflow", {"chatflow_id": flow_id, "deployed": True}),
    )
    refresh()  # the new flow reaches routing's view (published, memo dropped)
    ran = call(mine.key, "run_prediction", chatflow_id=flow_id, question="hello there")
    deleted = call(mine.key, "delete_chatflow", chatflow_id=flow_id)

    assert ok(created)["id"] == flow_id
    assert (ok(created)["backend"], ok(created)["deployed"]) == ("mine", False)
    assert json.loads(ok(got)["flowData"]) == json.loads(ECHO_FLOW)
    assert "flowData: " in text(got)
    assert ok(updated)["name"] == "renamed"
    assert ok(deployed)["deployed"] is True
    prediction = ok(ran)
    assert prediction["text"] == body("flowise", "prediction_chatflow")["text"]
    # Seed 003: Flowise's own id of the answer is kept (it was dropped).
    assert prediction["chatMessageId"] == body("flowise", "prediction_chatflow")["chatMessageId"]
    assert prediction["routing"]["routing_method"] == "explicit"
    assert prediction["sessionId"] in text(ran)
    assert ok(deleted) == {"message": "Chatflow deleted successfully", "deleted_id": flow_id}
    assert Flow.objects.get(backend=mine.flowise, external_id=flow_id).removed_at is not None
    for result in (created, got, updated, deployed, ran, deleted):
        assert "SECRET" not in dumped(result)


def test_list_chatflows_shows_shared_and_own_flows(mine: Mine) -> None:
    Flow.objects.create(backend=mine.flowise, external_id="own-1", name="own", deployed=True)

    result = call(mine.key, "list_chatflows")

    assert {(c["backend"], c["id"]) for c in ok(result)["result"]} >= {
        ("fw", body("flowise", "chatflow_get")["id"]),
        ("mine", "own-1"),
    }
    assert "own (id own-1, CHATFLOW, deployed, on mine)" in text(result)


@override_settings(FLOWISE_GENERATOR_MODEL={"name": "chatOpenAI", "inputs": {"credential": "c1"}})
def test_generate_agentflow_v2_answers_flow_data_for_create(world: World, key: str) -> None:
    agentflow = json.loads(body("flowise", "chatflow_get")["flowData"])
    world.router.post("http://fw.test/api/v1/agentflowv2-generator/generate").mock(
        return_value=httpx.Response(200, json=agentflow)
    )

    result = call(key, "generate_agentflow_v2", description="A research agent that summarizes")

    generated = ok(result)
    assert json.loads(generated["flowData"])["nodes"] == agentflow["nodes"]
    assert generated["backend"] == "fw"
    assert "create_chatflow" in text(result)


# --- errors: every one in the error shape ------------------------------------------------------


@pytest.mark.parametrize(
    ("arguments", "field"),
    [
        ({"name": "", "flow_data": ECHO_FLOW}, "name"),
        ({"name": "x" * 256, "flow_data": ECHO_FLOW}, "name"),
        ({"name": "ok", "flow_data": ECHO_FLOW, "type": "ROBOT"}, "type"),
        ({"flow_data": ECHO_FLOW}, "name"),
    ],
)
def test_arguments_the_schema_refuses_are_a_validation_error(
    mine: Mine, arguments: dict[str, Any], field: str
) -> None:
    result = call(mine.key, "create_chatflow", **arguments)

    refused = error(result)
    assert refused["type"] == "ValidationError"
    assert field in refused["details"]["fields"]
    assert not mine.router.calls


@pytest.mark.parametrize(
    ("arguments", "constraint"),
    [
        ({"name": "ok", "flow_data": "not json"}, "json"),
        ({"name": "ok", "flow_data": '{"nodes": []}'}, "nodesAndEdges"),
    ],
)
def test_what_the_service_refuses_is_its_validation_error(
    mine: Mine, arguments: dict[str, Any], constraint: str
) -> None:
    result = call(mine.key, "create_chatflow", backend="mine", **arguments)

    refused = error(result)
    assert refused["type"] == "ValidationError"
    assert (refused["details"]["field"], refused["details"]["constraint"]) == (
        "flow_data",
        constraint,
    )
    assert not mine.router.calls


@pytest.mark.parametrize(
    ("arguments", "field", "constraint"),
    [
        ({"flow_data": "not json"}, "flow_data", "json"),
        ({"name": "  "}, "name", "length"),
        ({"chatflow_id": "../up"}, "chatflow_id", "format"),
    ],
)
def test_a_bad_update_names_its_field_and_constraint_as_rest_does(
    mine: Mine, arguments: dict[str, Any], field: str, constraint: str
) -> None:
    # The types the tool is published with carry the lifecycle's rules and words, so the
    # SDK's refusal reads as the service's would.
    result = call(mine.key, "update_chatflow", **{"chatflow_id": "f-1", **arguments})

    refused = error(result)
    assert (refused["details"]["field"], refused["details"]["constraint"]) == (field, constraint)
    assert not mine.router.calls


def test_an_update_that_changes_nothing_is_refused(mine: Mine) -> None:
    Flow.objects.create(backend=mine.flowise, external_id="f-1", name="one")

    result = call(mine.key, "update_chatflow", chatflow_id="f-1")

    assert error(result)["details"]["constraint"] == "anyOf"


def test_a_bad_query_is_refused_with_its_fields(world: World, key: str) -> None:
    unknown_intent, bad_parameters, bad_session = session(
        key,
        ("universal_query", {"question": "hi", "intent": "astrology"}),
        ("universal_query", {"question": "hi", "parameters": {"temperature": 5}}),
        ("universal_query", {"question": "hi", "session_id": "not-a-uuid"}),
    )

    assert error(unknown_intent)["type"] == "ValidationError"
    assert "parameters.temperature" in error(bad_parameters)["details"]["fields"]
    assert "session_id" in error(bad_session)["details"]["fields"]
    assert not world.router.calls


def test_an_unknown_chatflow_is_not_found(world: World, key: str) -> None:
    result = call(key, "get_chatflow", chatflow_id="no-such-flow")

    assert error(result)["type"] == "NotFoundError"


def test_a_tenant_may_not_write_a_shared_flow(world: World, key: str) -> None:
    updated, deleted = session(
        key,
        ("update_chatflow", {"chatflow_id": world.fw_flow.external_id, "name": "mine now"}),
        ("delete_chatflow", {"chatflow_id": world.fw_flow.external_id}),
    )

    assert error(updated)["type"] == "PermissionDenied"
    assert error(deleted)["type"] == "PermissionDenied"
    assert not world.router.calls


def test_langflow_deployment_is_a_validation_error_naming_the_kind(mine: Mine) -> None:
    langflow = Backend.objects.create(
        name="mine-lf", kind="langflow", base_url="http://mine-lf.test", tenant=mine.tenant
    )
    Flow.objects.create(backend=langflow, external_id="LF-1", name="lf one", deployed=True)

    result = call(mine.key, "deploy_chatflow", chatflow_id="LF-1", deployed=True)

    refused = error(result)
    assert refused["type"] == "ValidationError"
    assert refused["message"].startswith("Langflow backend 'mine-lf'")
    assert not mine.router.calls


@pytest.mark.parametrize(
    ("failure", "expected"),
    [
        (httpx.ConnectError("refused"), "ConnectionError"),
        (httpx.ReadTimeout("no answer"), "TimeoutError"),
        (response("flowise", "wrong_api_key"), "AuthenticationError"),
    ],
)
def test_a_backends_failure_keeps_its_type_and_names_the_backend(
    mine: Mine, failure: Any, expected: str
) -> None:
    Flow.objects.create(backend=mine.flowise, external_id="f-1", name="one")
    route = mine.router.get(f"{MINE}/api/v1/chatflows/f-1")
    if isinstance(failure, httpx.Response):
        route.mock(return_value=failure)
    else:
        route.mock(side_effect=failure)

    result = call(mine.key, "get_chatflow", chatflow_id="f-1")

    failed = error(result)
    assert failed["type"] == expected
    assert failed["details"]["backend"] == "mine"
    assert "SECRET" not in dumped(result)


def test_a_bug_is_an_internal_error_without_its_details(
    world: World, key: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(**kwargs: Any) -> list[dict[str, Any]]:
        raise RuntimeError("boom sk-FW-SECRET")

    monkeypatch.setattr(lifecycle, "chatflows_list", broken)

    result = call(key, "list_chatflows")

    failed = error(result)
    assert failed["type"] == "InternalError"
    assert "boom" not in dumped(result)
    assert "SECRET" not in dumped(result)
    assert "boom" in caplog.text  # logged, with its traceback, on the server's side


def test_an_unknown_tool_is_not_found(world: World, key: str) -> None:
    assert error(call(key, "no_such_tool"))["type"] == "NotFoundError"


# --- the caller: API key, rate limit, tenancy --------------------------------------------------


def test_an_unknown_or_revoked_key_is_refused(world: World, key: str) -> None:
    unknown = call("fw_00000000_not-a-key", "list_backends")
    api_key_revoke(api_key=ApiKey.objects.get(name="mcp"))
    revoked = call(key, "list_backends")

    assert error(unknown)["type"] == "AuthenticationError"
    assert error(revoked)["type"] == "AuthenticationError"


def test_every_call_counts_against_the_keys_rate_limit(world: World, tenant: Tenant) -> None:
    _, limited = api_key_create(tenant=tenant, name="limited", rate_limit="2/minute")

    results = session(limited, *[("list_backends", {})] * 3)

    assert [r.is_error for r in results] == [False, False, True]
    refused = error(results[2])
    assert refused["type"] == "RateLimitError"
    assert refused["details"]["retry_after"] >= 1


def test_another_tenants_flows_and_sessions_do_not_exist(mine: Mine, other_key: str) -> None:
    Flow.objects.create(backend=mine.flowise, external_id="theirs", name="theirs", deployed=True)
    refresh()
    asked = ok(call(mine.key, "universal_query", question=REVIEW))

    listed, got, ran, history, sessions, backends = session(
        other_key,
        ("list_chatflows", {}),
        ("get_chatflow", {"chatflow_id": "theirs"}),
        ("run_prediction", {"chatflow_id": "theirs", "question": "hi"}),
        ("get_session_history", {"session_id": asked["session_id"]}),
        ("list_sessions", {}),
        ("list_backends", {}),
    )

    assert "theirs" not in {c["id"] for c in ok(listed)["result"]}
    assert error(got)["type"] == "NotFoundError"
    assert error(ran)["type"] == "NotFoundError"
    assert error(history)["type"] == "NotFoundError"
    assert ok(sessions)["result"] == []
    assert "mine" not in {b["name"] for b in ok(backends)["result"]}
    assert not [c for c in mine.router.calls if c.request.url.host == "mine.test"]


def test_no_result_carries_a_backends_key(mine: Mine, world: World) -> None:
    Flow.objects.create(backend=mine.flowise, external_id="f-1", name="one", deployed=True)
    mine.router.get(f"{MINE}/api/v1/chatflows/f-1").mock(
        return_value=response("flowise", "wrong_api_key")
    )

    results = session(
        mine.key,
        ("universal_query", {"question": REVIEW}),
        ("route_query", {"question": REVIEW}),
        ("list_backends", {}),
        ("list_flows", {}),
        ("list_chatflows", {}),
        ("get_chatflow", {"chatflow_id": "f-1"}),
        ("list_sessions", {}),
    )

    for result in results:
        assert "SECRET" not in dumped(result), result


def test_sessions_are_listed_newest_first_in_one_query(
    world: World, key: str, tenant: Tenant, django_assert_num_queries: Any
) -> None:
    from routing.answering.sessions import sessions_list

    first = ok(call(key, "universal_query", question=REVIEW))["session_id"]
    second = ok(call(key, "universal_query", question="Summarize the design doc"))["session_id"]
    ok(call(key, "universal_query", question="What is new?"))  # one-shot, left so
    ok(call(key, "universal_query", question="And the risks?", session_id=second))
    ok(call(key, "universal_query", question="And the tests?", session_id=first))

    with django_assert_num_queries(1):
        rows = sessions_list(tenant_id=tenant.pk, limit=50)
    limited = ok(call(key, "list_sessions", limit=1))["result"]

    assert [str(r["id"]) for r in rows] == [first, second]  # no conversation of the one-shot
    assert [(r["turn_count"], r["first_question"]) for r in rows] == [
        (2, REVIEW),
        (2, "Summarize the design doc"),
    ]
    assert [s["id"] for s in limited] == [first]

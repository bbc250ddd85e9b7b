"""The MCP tools: thin doors over the services every other door calls.

Each takes the caller's tenant first (agents/server.py supplies it from the
API key and hides it from the published schema), then the tool's arguments
as typed here; the types and ``Field`` constraints become the inputSchema,
the return annotation's model (agents/schemas.py) the outputSchema. A tool
validates nothing beyond that schema: the services check the rest and raise
the typed errors that agents/server.py turns into the error shape. The
shared argument types are chatflows/contract.py's. The query tools, and the
lists of flows and sessions, take their REST door's contract instead
(:func:`takes`): its fields are published as it declares them, and
validated by it, as on the REST doors.

Synchronous services run on the shared executor (``flywheel.asyncdb.db``):
no ORM call is made on the event loop. A backend, a flow and a session are
shown with REST's own presenters (backends.api, chatflows.api, routing.api),
so both doors show the same fields, and never a backend's API key.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Callable, Mapping
from typing import Annotated, Any, TypeVar

from mcp_types import CallToolResult, TextContent
from pydantic import Field

from agents import schemas, text
from backends.api import backend_shown
from backends.selectors import backend_get_for, backends_visible_to
from backends.services import backends_health_check_now
from chatflows import lifecycle
from chatflows.api import FlowSerializer
from chatflows.contract import (
    AgentflowRequest,
    Chatflow,
    ChatflowCreate,
    ChatflowId,
    ChatflowListed,
    ChatflowName,
    ChatflowType,
    ChatflowWithData,
    Deleted,
    Deployed,
    FlowData,
    Generated,
    OnBackend,
)
from chatflows.filters import FlowFilters
from chatflows.routing_contract import FlowRoutingChange
from chatflows.selectors import flows_visible_to
from chatflows.services import flow_routing_change
from flywheel.asyncdb import db
from flywheel.contract import Contract
from flywheel.errors import ApplicationError
from flywheel.links import public_url
from flywheel.models import Tenant
from routing.answering.query_input import QueryRequest, query_request
from routing.answering.query_output import QueryAnswer, RoutePlan
from routing.answering.service import answer_question, route_question, run_flow
from routing.answering.sessions import SessionList, session_get, sessions_list
from routing.api import SessionSerializer, SessionSummarySerializer


def result(readable: str, structured: Mapping[str, Any]) -> CallToolResult:
    return CallToolResult(
        content=[TextContent(type="text", text=readable)], structured_content=dict(structured)
    )


def _absolute(body: dict[str, Any]) -> dict[str, Any]:
    """trace_url and session_url as links where the web app is (flywheel/links.py:
    FLYWHEEL_PUBLIC_URL, else where make run serves); relative if neither is known."""
    base = public_url()
    for link in ("trace_url", "session_url"):
        if base and body.get(link, "").startswith("/"):
            body[link] = base + body[link]
    return body


Tool = TypeVar("Tool", bound=Callable[..., Any])


def takes(
    contract: type[Contract], *fields: str, validated: bool = False
) -> Callable[[Tool], Tool]:
    """Mark a tool as taking ``fields`` of ``contract`` (all of them by default), in
    ``**kwargs``: agents/server.py publishes them as the contract declares them. The
    SDK checks them against it when ``validated``; otherwise they are handed over as
    sent, for the service to validate with the contract itself, so that a refusal
    reads as on every other door."""

    def mark(tool: Tool) -> Tool:
        taken = (contract, fields or tuple(contract.model_fields), validated)
        tool.__contract__ = taken  # type: ignore[attr-defined]
        return tool

    return mark


# --- routing ------------------------------------------------------------------------------


@takes(QueryRequest)
async def universal_query(tenant: Tenant, **query: Any) -> Annotated[CallToolResult, QueryAnswer]:
    """Query AI workflows across all backends with intelligent routing. Classifies the
    question's intent, picks the best flow on a healthy backend (Flowise or Langflow) by
    flow match, health and performance, runs it, falls back along a chain when one fails,
    and keeps the conversation (session_id) across backends."""
    body = _absolute(await answer_question(query_request(query), tenant=tenant))
    return result(text.query_answer(body), body)


@takes(QueryRequest, "question", "intent", "session_id", "parameters", "include_routing_metadata")
async def flowise_query(tenant: Tenant, **query: Any) -> Annotated[CallToolResult, QueryAnswer]:
    """Query Flowise flows only (seed 000's flowise_query, kept for agents written for
    it): as universal_query with backend 'flowise', so only Flowise backends answer,
    falling back from one to another. universal_query routes across every backend."""
    asked = query_request({**query, "backend": "flowise", "fallback": False})
    body = _absolute(await answer_question(asked, tenant=tenant))
    return result(text.query_answer(body), body)


@takes(QueryRequest, "question", "intent", "backend", "session_id", "flow", "fallback")
async def route_query(tenant: Tenant, **query: Any) -> Annotated[CallToolResult, RoutePlan]:
    """Dry run of universal_query: the intent and every candidate flow with its scores,
    without running or recording anything."""
    plan = await route_question(query_request(query), tenant=tenant)
    return result(text.route_plan(plan), plan)


# --- backends and flows -------------------------------------------------------------------


def _backends_shown(tenant: Tenant) -> list[dict[str, Any]]:
    return [dict(backend_shown(b)) for b in backends_visible_to(tenant)]


async def list_backends(tenant: Tenant) -> Annotated[CallToolResult, list[schemas.BackendShown]]:
    """The backends you can use: shared ones (name, kind and health only) and your own
    (with their settings; API keys are never shown)."""
    rows = await db(_backends_shown)(tenant)
    return result(text.backends(rows), {"result": rows})


def _health_check(tenant: Tenant, backend_id: int) -> dict[str, Any]:
    (outcome,) = backends_health_check_now(
        backends=[backend_get_for(tenant, backend_id)], tenant=tenant
    )
    if isinstance(outcome, ApplicationError):
        raise outcome
    return dataclasses.asdict(outcome)


async def check_backend_health(
    tenant: Tenant,
    backend_id: Annotated[int, Field(ge=1, description="The backend's id (see list_backends).")],
) -> Annotated[CallToolResult, schemas.HealthOutcome]:
    """Probe one of your own backends now (at most once per 10 s per backend); shared
    backends are checked on a schedule by Flywheel."""
    outcome = await db(_health_check)(tenant, backend_id)
    return result(text.health(outcome), outcome)


def _flows_shown(tenant: Tenant, filters: dict[str, Any]) -> list[dict[str, Any]]:
    flows = flows_visible_to(tenant, **filters)
    return [dict(row) for row in FlowSerializer(flows, many=True).data]


@takes(FlowFilters)
async def list_flows(
    tenant: Tenant, **filters: Any
) -> Annotated[CallToolResult, list[schemas.FlowShown]]:
    """The active flows Flywheel routes to, with the intents each serves."""
    rows = await db(_flows_shown)(tenant, filters)
    return result(text.flows(rows), {"result": rows})


def _flow_routing_set(tenant: Tenant, flow_id: int, changes: dict[str, Any]) -> dict[str, Any]:
    flow = flow_routing_change(tenant=tenant, flow_id=flow_id, changes=changes)
    return dict(FlowSerializer(flow).data)


@takes(FlowRoutingChange)
async def set_flow_routing(
    tenant: Tenant,
    flow_id: Annotated[int, Field(ge=1, description="Flywheel's id of the flow (see list_flows).")],
    **changes: Any,
) -> Annotated[CallToolResult, schemas.FlowShown]:
    """Set how routing uses one of your own flows: its scope (global, local or any: the
    query type it is made for), whether it is generic (serves any intent), or the intents
    it serves. Give at least one; what you set is kept by later discoveries. Flows on
    shared backends are set by an administrator."""
    row = await db(_flow_routing_set)(tenant, flow_id, changes)
    return result(text.flow_set(row), row)


# --- the chatflow lifecycle (seed 003) -----------------------------------------------------


async def list_chatflows(
    tenant: Tenant,
    backend: OnBackend = None,
    type: Annotated[ChatflowType | None, Field(description="Only flows of this type.")] = None,
) -> Annotated[CallToolResult, list[ChatflowListed]]:
    """List all available chatflows (Flowise) and flows (Langflow) with their metadata."""
    rows = await db(lifecycle.chatflows_list)(tenant=tenant, backend=backend, flow_type=type)
    return result(text.chatflows(rows), {"result": rows})


async def get_chatflow(
    tenant: Tenant, chatflow_id: ChatflowId, backend: OnBackend = None
) -> Annotated[CallToolResult, ChatflowWithData]:
    """Get detailed chatflow information including workflow structure (flowData)."""
    flow = await lifecycle.chatflow_get(tenant=tenant, chatflow_id=chatflow_id, backend=backend)
    return result(text.chatflow(flow), flow)


@takes(ChatflowCreate, validated=True)
async def create_chatflow(
    tenant: Tenant, backend: OnBackend = None, **flow: Any
) -> Annotated[CallToolResult, Chatflow]:
    """Create a new chatflow from a workflow structure, on one of your own backends."""
    created = await lifecycle.chatflow_create(tenant=tenant, backend=backend, **flow)
    return result(text.chatflow(created, verb="created"), created)


async def update_chatflow(
    tenant: Tenant,
    chatflow_id: ChatflowId,
    name: ChatflowName | None = None,
    flow_data: FlowData | None = None,
    deployed: Deployed | None = None,
    backend: OnBackend = None,
) -> Annotated[CallToolResult, Chatflow]:
    """Update an existing chatflow's name, flow_data or deployment (give at least one)."""
    flow = await lifecycle.chatflow_update(
        tenant=tenant,
        chatflow_id=chatflow_id,
        name=name,
        flow_data=flow_data,
        deployed=deployed,
        backend=backend,
    )
    return result(text.chatflow(flow, verb="updated"), flow)


async def delete_chatflow(
    tenant: Tenant, chatflow_id: ChatflowId, backend: OnBackend = None
) -> Annotated[CallToolResult, Deleted]:
    """Permanently delete a chatflow from its backend."""
    body = await lifecycle.chatflow_delete(tenant=tenant, chatflow_id=chatflow_id, backend=backend)
    return result(text.deleted(body), body)


@takes(QueryRequest, "question", "session_id")
async def run_prediction(
    tenant: Tenant, chatflow_id: ChatflowId, backend: OnBackend = None, **query: Any
) -> Annotated[CallToolResult, schemas.Prediction]:
    """Execute a deployed chatflow with user input (recorded like any query)."""
    body = _absolute(
        await run_flow(
            tenant=tenant,
            chatflow_id=chatflow_id,
            question=query.get("question"),
            backend=backend,
            session_id=query.get("session_id"),
        )
    )
    shown = {
        "text": body["answer"],
        "sessionId": body["session_id"],
        "request_id": body["request_id"],
        "trace_url": body["trace_url"],
    }
    backend_ids = body.get("backend_ids") or {}
    for name in ("chatMessageId", "questionMessageId"):  # seed 003: Flowise's, kept
        if name in backend_ids:
            shown[name] = backend_ids[name]
    if "routing" in body:
        shown["routing"] = body["routing"]
    return result(text.prediction(shown), shown)


async def deploy_chatflow(
    tenant: Tenant, chatflow_id: ChatflowId, deployed: Deployed, backend: OnBackend = None
) -> Annotated[CallToolResult, Chatflow]:
    """Deploy or undeploy a Flowise chatflow (Langflow flows need no deployment)."""
    flow = await lifecycle.chatflow_deploy(
        tenant=tenant, chatflow_id=chatflow_id, deployed=deployed, backend=backend
    )
    return result(text.chatflow(flow, verb="deployed" if deployed else "undeployed"), flow)


@takes(AgentflowRequest, validated=True)
async def generate_agentflow_v2(
    tenant: Tenant, backend: OnBackend = None, **request: Any
) -> Annotated[CallToolResult, Generated]:
    """Generate an AgentFlow V2 workflow from a natural language description (on a shared
    Flowise backend); pass its flowData to create_chatflow."""
    body = await lifecycle.chatflow_generate(tenant=tenant, backend=backend, **request)
    return result(text.generated(body), body)


# --- sessions ---------------------------------------------------------------------------------


def _session_shown(tenant: Tenant, session_id: uuid.UUID) -> dict[str, Any]:
    session = session_get(tenant_id=tenant.pk, session_id=str(session_id))
    return dict(SessionSerializer(session).data)


async def get_session_history(
    tenant: Tenant,
    session_id: Annotated[uuid.UUID, Field(description="A session_id from an earlier answer.")],
) -> Annotated[CallToolResult, schemas.SessionHistory]:
    """A conversation and its turns (question, answer, intent, backend and flow)."""
    session = await db(_session_shown)(tenant, session_id)
    return result(text.session_history(session), session)


@takes(SessionList)
async def list_sessions(
    tenant: Tenant, **query: Any
) -> Annotated[CallToolResult, list[schemas.SessionSummary]]:
    """Your conversations, most recently active first, with their first question and the
    start of their last answer."""
    listed = await db(sessions_list)(tenant_id=tenant.pk, **query)
    rows = [dict(row) for row in SessionSummarySerializer(listed, many=True).data]
    return result(text.sessions(rows), {"result": rows})

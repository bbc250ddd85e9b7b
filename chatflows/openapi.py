"""OpenAPI for the chatflow endpoints (async views: chatflows/chatflow_api.py), added by a
drf-spectacular post-processing hook that runs before flywheel.openapi's error table
(SPECTACULAR_SETTINGS). A chatflow's predict is routing's (routing/openapi.py).

Every body, request and answer, is drawn from chatflows/contract.py. What is
written here is where each applies: the paths, and the parameters of the
path and query string, which are not bodies (``?backend=`` may be sent empty,
meaning no backend, which a body's ``backend`` never is).
"""

from __future__ import annotations

from typing import Any

from chatflows.contract import (
    MAX_BACKEND,
    AgentflowRequest,
    Chatflow,
    ChatflowCreate,
    ChatflowDeploy,
    ChatflowId,
    ChatflowListed,
    ChatflowReplace,
    ChatflowType,
    ChatflowUpdate,
    ChatflowWithData,
    Deleted,
    Generated,
)
from flywheel.openapi import operation
from flywheel.schemas import openapi_schema

BACKEND = {
    "name": "backend",
    "in": "query",
    "required": False,
    "allowEmptyValue": True,
    "description": "A backend's id or name: where the flow is, or where a new one goes. "
    "Empty, or blank once trimmed: no backend named.",
    "schema": {"type": "string", "maxLength": MAX_BACKEND},
}
TYPE = {
    "name": "type",
    "in": "query",
    "required": False,
    "allowEmptyValue": True,
    "schema": openapi_schema(ChatflowType),
}
CHATFLOW_ID = {
    "name": "chatflow_id",
    "in": "path",
    "required": True,
    "description": "The backend's id for the flow, or Flywheel's.",
    "schema": {k: v for k, v in openapi_schema(ChatflowId).items() if k != "description"},
}


def _op(
    operation_id: str,
    summary: str,
    response: Any,
    body: Any,
    parameters: list[dict[str, Any]],
    *,
    status: int = 200,
) -> dict[str, Any]:
    """An operation answering ``response`` (a contract), taking ``body`` (one, or None)."""
    built = operation(
        operation_id,
        summary,
        openapi_schema(response, mode="serialization"),
        None if body is None else openapi_schema(body),
        tag="chatflows",
        status=status,
    )
    built["parameters"] = parameters
    return built


def add_chatflow_endpoints(
    result: dict[str, Any], generator: Any, request: Any, public: bool
) -> dict[str, Any]:
    """drf-spectacular post-processing hook: the chatflow lifecycle's endpoints."""
    paths = result.setdefault("paths", {})
    many = list[ChatflowListed]
    paths["/api/v1/chatflows"] = {
        "get": _op("chatflows_list", "Flows on the key's backends", many, None, [BACKEND, TYPE]),
        "post": _op(
            "chatflows_create", "Create a flow", Chatflow, ChatflowCreate, [BACKEND], status=201
        ),
    }
    paths["/api/v1/chatflows/generate"] = {
        "post": _op(
            "chatflows_generate",
            "Generate an AgentFlow V2 from a description (Flowise)",
            Generated,
            AgentflowRequest,
            [BACKEND],
        )
    }
    one = [CHATFLOW_ID, BACKEND]
    paths["/api/v1/chatflows/{chatflow_id}"] = {
        "get": _op("chatflows_retrieve", "A flow, with its flowData", ChatflowWithData, None, one),
        "put": _op("chatflows_update", "Replace name and flowData", Chatflow, ChatflowReplace, one),
        "patch": _op("chatflows_partial_update", "Change a flow", Chatflow, ChatflowUpdate, one),
        "delete": _op("chatflows_destroy", "Delete a flow", Deleted, None, one),
    }
    deploy = _op("chatflows_deploy", "Deploy or undeploy (Flowise)", Chatflow, ChatflowDeploy, one)
    deploy["requestBody"]["required"] = False  # no body: deploy
    paths["/api/v1/chatflows/{chatflow_id}/deploy"] = {"post": deploy}
    return result

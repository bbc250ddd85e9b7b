"""OpenAPI for the chatflow endpoints (async views: chatflows/chatflow_api.py), added by a
drf-spectacular post-processing hook that runs before flywheel.openapi's error table
(SPECTACULAR_SETTINGS). A chatflow's predict is routing's (routing/openapi.py)."""

from __future__ import annotations

from typing import Any

from chatflows.lifecycle import (
    CHATFLOW_TYPES,
    FLOW_ID,
    MAX_BACKEND,
    MAX_NAME,
    MIN_DESCRIPTION,
)
from flywheel.contract import NOT_BLANK, PY_SPACE
from flywheel.openapi import operation

_TEXT: dict[str, Any] = {"type": "string"}
_FLOW_DATA = {
    "type": "string",
    "minLength": 1,
    "description": "A JSON string (under 1 MB) of an object holding `nodes` and `edges` lists.",
}

CHATFLOW: dict[str, Any] = {
    "type": "object",
    "required": ["id", "name", "type", "deployed", "backend", "kind", "flow_id"],
    "properties": {
        "id": {**_TEXT, "description": "The backend's id for the flow."},
        "name": _TEXT,
        "type": {"type": "string", "enum": [*CHATFLOW_TYPES, "FLOW"]},
        "deployed": {"type": "boolean"},
        "description": _TEXT,
        "backend": _TEXT,
        "backend_id": {"type": "integer"},
        "kind": {"type": "string", "enum": ["flowise", "langflow"]},
        "flow_id": {"type": "integer", "description": "Flywheel's id for the flow."},
        "createdDate": {"type": "string", "nullable": True},
        "updatedDate": {"type": "string", "nullable": True},
    },
}
CHATFLOW_LISTED = {
    **CHATFLOW,
    "properties": {
        **CHATFLOW["properties"],
        "intent_keywords": {"type": "array", "items": _TEXT},
        "last_seen_at": {"type": "string", "format": "date-time"},
    },
}
CHATFLOW_DETAIL = {
    **CHATFLOW,
    "properties": {**CHATFLOW["properties"], "flowData": {"type": "string", "nullable": True}},
}
NAME = {"type": "string", "minLength": 1, "maxLength": MAX_NAME, "pattern": NOT_BLANK}
CREATE = {
    "type": "object",
    "additionalProperties": False,
    "required": ["name", "flow_data"],
    "properties": {
        "name": NAME,
        "flow_data": _FLOW_DATA,
        "type": {"type": "string", "enum": list(CHATFLOW_TYPES), "default": "CHATFLOW"},
        "deployed": {"type": "boolean", "default": False},
    },
}
UPDATE = {
    "type": "object",
    "additionalProperties": False,
    "minProperties": 1,
    "properties": {"name": NAME, "flow_data": _FLOW_DATA, "deployed": {"type": "boolean"}},
}
REPLACE = {**UPDATE, "required": ["name", "flow_data"]}
DEPLOY = {
    "type": "object",
    "additionalProperties": False,
    "properties": {"deployed": {"type": "boolean", "default": True}},
}
DELETED = {
    "type": "object",
    "required": ["message", "deleted_id"],
    "properties": {"message": _TEXT, "deleted_id": _TEXT},
}
GENERATE = {
    "type": "object",
    "additionalProperties": False,
    "required": ["description"],
    "properties": {
        "description": {
            "type": "string",
            "minLength": MIN_DESCRIPTION,
            "maxLength": 10_000,
            # At least MIN_DESCRIPTION characters once trimmed, as the server counts them.
            "pattern": f"^[{PY_SPACE}]*[^{PY_SPACE}][\\s\\S]{{{MIN_DESCRIPTION - 2},}}"
            f"[^{PY_SPACE}][{PY_SPACE}]*$",
        }
    },
}
GENERATED = {
    "type": "object",
    "required": ["flowData", "name", "description"],
    "properties": {"flowData": _TEXT, "name": _TEXT, "description": _TEXT, "backend": _TEXT},
}
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
    "schema": {"type": "string", "enum": list(CHATFLOW_TYPES)},
}
CHATFLOW_ID = {
    "name": "chatflow_id",
    "in": "path",
    "required": True,
    "description": "The backend's id for the flow, or Flywheel's.",
    "schema": {"type": "string", "pattern": f"^{FLOW_ID.pattern}$"},
}


def _op(
    operation_id: str,
    summary: str,
    response: dict[str, Any],
    body: dict[str, Any] | None,
    parameters: list[dict[str, Any]],
    *,
    status: int = 200,
) -> dict[str, Any]:
    built = operation(operation_id, summary, response, body, tag="chatflows", status=status)
    built["parameters"] = parameters
    return built


def add_chatflow_endpoints(
    result: dict[str, Any], generator: Any, request: Any, public: bool
) -> dict[str, Any]:
    """drf-spectacular post-processing hook: the chatflow lifecycle's endpoints."""
    paths = result.setdefault("paths", {})
    many = {"type": "array", "items": CHATFLOW_LISTED}
    paths["/api/v1/chatflows"] = {
        "get": _op("chatflows_list", "Flows on the key's backends", many, None, [BACKEND, TYPE]),
        "post": _op("chatflows_create", "Create a flow", CHATFLOW, CREATE, [BACKEND], status=201),
    }
    paths["/api/v1/chatflows/generate"] = {
        "post": _op(
            "chatflows_generate",
            "Generate an AgentFlow V2 from a description (Flowise)",
            GENERATED,
            GENERATE,
            [BACKEND],
        )
    }
    one = [CHATFLOW_ID, BACKEND]
    paths["/api/v1/chatflows/{chatflow_id}"] = {
        "get": _op("chatflows_retrieve", "A flow, with its flowData", CHATFLOW_DETAIL, None, one),
        "put": _op("chatflows_update", "Replace name and flowData", CHATFLOW, REPLACE, one),
        "patch": _op("chatflows_partial_update", "Change a flow", CHATFLOW, UPDATE, one),
        "delete": _op("chatflows_destroy", "Delete a flow", DELETED, None, one),
    }
    deploy = _op("chatflows_deploy", "Deploy or undeploy (Flowise)", CHATFLOW, DEPLOY, one)
    deploy["requestBody"]["required"] = False  # no body: deploy
    paths["/api/v1/chatflows/{chatflow_id}/deploy"] = {"post": deploy}
    return result

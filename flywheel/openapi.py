"""OpenAPI for the async endpoints that DRF does not see (the query path).

drf-spectacular documents DRF views; the query endpoints are plain async
views (see flywheel/asyncapi.py), so this post-processing hook adds them.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.extensions import OpenApiAuthenticationExtension

ERROR = {
    "type": "object",
    "properties": {
        "error": {
            "type": "object",
            "properties": {
                "type": {"type": "string"},
                "message": {"type": "string"},
                "details": {"type": "object", "additionalProperties": True},
            },
            "required": ["type", "message", "details"],
        }
    },
    "required": ["error"],
}

QUERY_REQUEST = {
    "type": "object",
    "additionalProperties": False,
    "required": ["question"],
    "properties": {
        "question": {"type": "string", "minLength": 1, "maxLength": 10000},
        "intent": {"type": "string", "description": "Skip classification: use this intent."},
        "backend": {
            "type": "string",
            "default": "auto",
            "description": "'auto', or a backend's name or kind (flowise, langflow).",
        },
        "session_id": {"type": "string", "format": "uuid"},
        "parameters": {
            "type": "object",
            "additionalProperties": True,
            "properties": {
                "temperature": {"type": "number", "minimum": 0, "maximum": 2},
                "max_tokens": {"type": "integer", "minimum": 1},
                "stream": {"type": "boolean", "description": "Answer as Server-Sent Events."},
                "tweaks": {"type": "object", "description": "Langflow tweaks, passed through."},
            },
        },
        "include_routing_metadata": {"type": "boolean", "default": True},
    },
}

CANDIDATE = {
    "type": "object",
    "properties": {
        name: {"type": kind}
        for name, kind in {
            "backend": "string",
            "kind": "string",
            "flow": "string",
            "flow_id": "string",
            "score": "number",
            "match": "number",
            "health": "number",
            "performance": "number",
            "generic": "boolean",
        }.items()
    },
}

QUERY_ANSWER = {
    "type": "object",
    "required": ["answer", "session_id", "request_id", "trace_url"],
    "properties": {
        "answer": {"type": "string"},
        "session_id": {"type": "string", "format": "uuid"},
        "request_id": {"type": "string", "format": "uuid"},
        "trace_url": {"type": "string", "format": "uri"},
        "routing": {
            "type": "object",
            "properties": {
                "intent": {"type": "string"},
                "intent_confidence": {"type": "number"},
                "method": {"type": "string", "enum": ["rules", "context", "llm", "override"]},
                "evidence": {"type": "array", "items": {"type": "string"}},
                "query_type": {"type": "object", "nullable": True},
                "routing_method": {"type": "string", "enum": ["auto", "explicit", "local"]},
                "backend": {"type": "string", "nullable": True},
                "flow": {"type": "string", "nullable": True},
                "score": {"type": "number", "nullable": True},
                "candidates": {"type": "array", "items": CANDIDATE},
                "fallback_used": {"type": "boolean"},
                "fallback_chain": {"type": "array", "items": {"type": "object"}},
                "cached": {"type": "boolean"},
                "timings": {"type": "object", "additionalProperties": {"type": "number"}},
            },
        },
    },
}

ROUTE_PLAN = {
    "type": "object",
    "properties": {
        "question": {"type": "string"},
        "intent": {"type": "string"},
        "confidence": {"type": "number"},
        "method": {"type": "string"},
        "evidence": {"type": "array", "items": {"type": "string"}},
        "query_type": {"type": "string", "nullable": True},
        "query_type_confidence": {"type": "number", "nullable": True},
        "candidates": {"type": "array", "items": CANDIDATE},
        "selected": {"allOf": [CANDIDATE], "nullable": True},
        "error": {"type": "object", "nullable": True},
    },
}

QUERY_TYPE = {
    "type": "object",
    "properties": {
        "query_type": {"type": "string", "enum": ["GLOBAL", "LOCAL", "HYBRID"]},
        "confidence": {"type": "number"},
        "reasoning": {"type": "string"},
        "global_weight": {"type": "number"},
        "local_weight": {"type": "number"},
        "method": {"type": "string", "enum": ["rules", "llm", "fallback"]},
        "tenant": {"type": "string"},
        "processing_time_ms": {"type": "number"},
    },
}


def _json(schema: dict[str, Any]) -> dict[str, Any]:
    return {"content": {"application/json": {"schema": schema}}}


def _errors(*statuses: int) -> dict[str, Any]:
    return {str(status): {"description": "Error", **_json(ERROR)} for status in statuses}


def _operation(
    operation_id: str,
    summary: str,
    response: dict[str, Any],
    body: dict[str, Any] | None,
    *errors: int,
) -> dict[str, Any]:
    operation: dict[str, Any] = {
        "operationId": operation_id,
        "summary": summary,
        "tags": ["query"],
        "security": [{"ApiKey": []}],
        "responses": {"200": {"description": "OK", **_json(response)}, **_errors(*errors)},
    }
    if body is not None:
        operation["requestBody"] = {"required": True, **_json(body)}
    return operation


def add_async_endpoints(
    result: dict[str, Any], generator: Any, request: Any, public: bool
) -> dict[str, Any]:
    """drf-spectacular post-processing hook: document the async query endpoints."""
    paths = result.setdefault("paths", {})
    query = _operation(
        "query_create",
        "Answer a question (Server-Sent Events when parameters.stream is true)",
        QUERY_ANSWER,
        QUERY_REQUEST,
        400,
        401,
        404,
        502,
        503,
    )
    query["responses"]["200"]["content"]["text/event-stream"] = {
        "schema": {"type": "string", "description": "chunk events, then end (the body) or error"}
    }
    paths["/api/v1/query"] = {"post": query}
    paths["/api/v1/route"] = {
        "post": _operation(
            "route_create",
            "Classify and score without running anything",
            ROUTE_PLAN,
            QUERY_REQUEST,
            400,
            401,
        )
    }
    paths["/api/v1/query-router/route"] = {
        "post": _operation(
            "query_router_route_create",
            "GLOBAL / LOCAL / HYBRID for a query (404 when query routing is off)",
            QUERY_TYPE,
            {"type": "object", "required": ["query"], "properties": {"query": {"type": "string"}}},
            400,
            401,
            404,
        )
    }
    paths["/api/v1/query-router/patterns"] = {
        "get": _operation(
            "query_router_patterns_retrieve",
            "The GLOBAL and LOCAL rules in use",
            {"type": "object"},
            None,
            401,
            404,
        )
    }
    paths["/api/v1/query-router/status"] = {
        "get": _operation(
            "query_router_status_retrieve",
            "Query router configuration (answers when off too)",
            {"type": "object"},
            None,
            401,
        )
    }
    schemes = result.setdefault("components", {}).setdefault("securitySchemes", {})
    schemes.setdefault("ApiKey", {"type": "http", "scheme": "bearer"})
    return result


class ApiKeyScheme(OpenApiAuthenticationExtension):
    """Tell drf-spectacular how ApiKeyAuthentication authenticates: a bearer key."""

    target_class = "flywheel.authentication.ApiKeyAuthentication"
    name = "ApiKey"

    def get_security_definition(self, auto_schema: Any) -> dict[str, str]:
        return {"type": "http", "scheme": "bearer"}

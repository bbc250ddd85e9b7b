"""OpenAPI for routing's async doors (routing/api.py), drawn from their contracts.

A drf-spectacular post-processing hook (SPECTACULAR_SETTINGS) adds the query
endpoints, the query router's and a chatflow's predict: plain async views
drf-spectacular cannot see. Every request and response schema comes from the
models of routing/answering/query_input.py and query_output.py, the ones the
doors validate with and the MCP tools publish.
"""

from __future__ import annotations

from typing import Any

from chatflows.openapi import BACKEND, CHATFLOW_ID
from flywheel.openapi import operation
from flywheel.schemas import openapi_schema
from routing.answering.query_input import PredictRequest, QueryRequest, QueryTypeRequest
from routing.answering.query_output import (
    QueryAnswer,
    QueryRouterStatus,
    QueryTypeAnswer,
    RoutePlan,
    ScopePatterns,
    StreamEvent,
)

# An event stream's schema describes one event (OpenAPI 3.0 has no itemSchema).
STREAM_EXAMPLE = (
    'event: chunk\ndata: {"text": "Hello"}\n\nevent: end\ndata: {"answer": "Hello"}\n\n'
)


def add_query_endpoints(
    result: dict[str, Any], generator: Any, request: Any, public: bool
) -> dict[str, Any]:
    """drf-spectacular post-processing hook: document routing's async endpoints."""
    paths = result.setdefault("paths", {})
    query = operation(
        "query_create",
        "Answer a question (Server-Sent Events when parameters.stream is true)",
        openapi_schema(QueryAnswer),
        openapi_schema(QueryRequest),
    )
    query["responses"]["200"]["content"]["text/event-stream"] = {
        "schema": openapi_schema(StreamEvent),
        "example": STREAM_EXAMPLE,
    }
    paths["/api/v1/query"] = {"post": query}
    paths["/api/v1/route"] = {
        "post": operation(
            "route_create",
            "Classify and score without running anything",
            openapi_schema(RoutePlan),
            openapi_schema(QueryRequest),
        )
    }
    predict = operation(
        "chatflows_predict",
        "Run this flow",
        openapi_schema(QueryAnswer),
        openapi_schema(PredictRequest),
        tag="chatflows",
    )
    predict["parameters"] = [CHATFLOW_ID, BACKEND]
    paths["/api/v1/chatflows/{chatflow_id}/predict"] = {"post": predict}
    _add_query_router(paths)
    return result


def _add_query_router(paths: dict[str, Any]) -> None:
    paths["/api/v1/query-router/route"] = {
        "post": operation(
            "query_router_route_create",
            "GLOBAL / LOCAL / HYBRID for a query (404 when query routing is off)",
            openapi_schema(QueryTypeAnswer),
            openapi_schema(QueryTypeRequest),
        )
    }
    paths["/api/v1/query-router/patterns"] = {
        "get": operation(
            "query_router_patterns_retrieve",
            "The GLOBAL and LOCAL rules in use (404 when query routing is off)",
            openapi_schema(ScopePatterns),
            None,
        )
    }
    paths["/api/v1/query-router/status"] = {
        "get": operation(
            "query_router_status_retrieve",
            "Query router configuration (answers when off too)",
            openapi_schema(QueryRouterStatus),
            None,
        )
    }

"""REST doors for routing: the universal query, the dry run, sessions, and seed 004's
query-router endpoints. Each calls the routing services. (Decisions are read through
analytics/api.py.)"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from typing import Any

from django.conf import settings
from django.http import HttpRequest, JsonResponse, StreamingHttpResponse
from django.http.response import HttpResponseBase
from drf_spectacular.utils import extend_schema, extend_schema_field
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from chatflows.chatflow_api import backend_param, body_of
from flywheel.asyncapi import async_api, json_body
from flywheel.asyncdb import db
from flywheel.authentication import request_api_key
from flywheel.errors import NotFoundError
from flywheel.jsonout import json_response
from flywheel.models import ApiKey
from flywheel.openapi import query_parameters
from flywheel.rest import absolute_url, query_values
from routing.answering import query_router
from routing.answering.query_input import PredictRequest, query_request, query_type_request
from routing.answering.service import (
    answer_question,
    query_refused,
    route_question,
    run_flow,
    stream_answer,
)
from routing.answering.sessions import SessionList, session_get, sessions_list


def _absolute(request: HttpRequest, body: dict[str, Any]) -> dict[str, Any]:
    for link in ("trace_url", "session_url"):
        if link in body:
            body[link] = absolute_url(request, body[link])
    return body


def _sse(event: str, data: dict[str, Any]) -> str:
    return f"event: {event}\ndata: {json.dumps(data)}\n\n"


async def sse_events(
    request: HttpRequest, events: AsyncIterator[dict[str, Any]]
) -> AsyncIterator[str]:
    """Answer events as Server-Sent Events; the ``end`` event's trace_url made absolute."""
    async for event in events:
        name = event.pop("event")
        yield _sse(name, _absolute(request, event) if name == "end" else event)


@async_api("POST", on_rate_limited=query_refused)
async def query(request: HttpRequest, api_key: ApiKey) -> HttpResponseBase:
    """POST /api/v1/query: answer a question (JSON; Server-Sent Events with parameters.stream)."""
    query_req = query_request(json_body(request))
    tenant = api_key.tenant  # loaded with the key
    if query_req.stream:
        response = StreamingHttpResponse(
            sse_events(request, stream_answer(query_req, tenant=tenant)),
            content_type="text/event-stream",
        )
        response["Cache-Control"] = "no-cache"
        response["X-Accel-Buffering"] = "no"
        return response
    body = await answer_question(query_req, tenant=tenant)
    return json_response(_absolute(request, body))


@async_api("POST")
async def route(request: HttpRequest, api_key: ApiKey) -> HttpResponseBase:
    """POST /api/v1/route: classify and score without running anything."""
    query_req = query_request(json_body(request))
    tenant = api_key.tenant  # loaded with the key
    return json_response(await route_question(query_req, tenant=tenant))


@async_api("POST")
async def chatflow_predict(
    request: HttpRequest, api_key: ApiKey, chatflow_id: str
) -> HttpResponseBase:
    """POST /api/v1/chatflows/{id}/predict: run that flow (a routed query with its flow
    given: recorded and measured like any other; no fallback unless asked)."""
    body = body_of(request, PredictRequest)
    answer = await run_flow(
        tenant=api_key.tenant,
        chatflow_id=chatflow_id,
        question=body.get("question"),
        backend=backend_param(request),
        session_id=body.get("session_id"),
        fallback=body.get("fallback", False),
        include_routing_metadata=body.get("include_routing_metadata", True),
    )
    return JsonResponse(_absolute(request, answer))


def _router_enabled() -> None:
    if not settings.QUERY_ROUTING_ENABLED:
        raise NotFoundError(
            "Query routing is disabled. Set QUERY_ROUTING_ENABLED=true to enable it; "
            "GET /api/v1/query-router/status answers either way.",
            details={"enabled": False},
        )


@async_api("POST")
async def query_router_route(request: HttpRequest, api_key: ApiKey) -> HttpResponseBase:
    """POST /api/v1/query-router/route {"query"}: GLOBAL / LOCAL / HYBRID with reasoning."""
    _router_enabled()
    question = query_type_request(json_body(request))
    tenant = api_key.tenant  # loaded with the key
    result = await query_router.route_query_type(question, tenant_slug=tenant.slug)
    return JsonResponse(result)


@async_api("GET")
async def query_router_patterns(request: HttpRequest, api_key: ApiKey) -> HttpResponseBase:
    """GET /api/v1/query-router/patterns: the GLOBAL and LOCAL rules in use."""
    _router_enabled()
    return JsonResponse(await db(query_router.patterns)())


@async_api("GET")
async def query_router_status(request: HttpRequest, api_key: ApiKey) -> HttpResponseBase:
    """GET /api/v1/query-router/status: configuration, whether enabled or not."""
    return JsonResponse(await db(query_router.status)())


class TurnSerializer(serializers.Serializer):
    question = serializers.CharField()
    answer = serializers.CharField()
    intent = serializers.CharField()
    backend = serializers.CharField(source="backend.name", allow_null=True, default=None)
    flow = serializers.CharField(source="flow.name", allow_null=True, default=None)
    created_at = serializers.DateTimeField()


class SessionSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()
    turns = serializers.SerializerMethodField()

    @extend_schema_field(TurnSerializer(many=True))
    def get_turns(self, session: Any) -> Any:
        turns = session.turns.select_related("backend", "flow").order_by("created_at", "id")
        return TurnSerializer(turns, many=True).data


class SessionView(APIView):
    """GET /api/v1/sessions/{id}: a conversation and its turns."""

    @extend_schema(responses=SessionSerializer)
    def get(self, request: Request, session_id: uuid.UUID) -> Response:
        # The route takes UUIDs only: any other id is a 404, like an unknown one.
        session = session_get(
            tenant_id=request_api_key(request).tenant_id, session_id=str(session_id)
        )
        return Response(SessionSerializer(session).data)


class SessionSummarySerializer(serializers.Serializer):
    id = serializers.UUIDField()
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField(help_text="When its last turn was written.")
    first_question = serializers.CharField()
    preview = serializers.CharField(help_text="The start of its last answer.")
    turn_count = serializers.IntegerField(min_value=1)


class SessionListView(APIView):
    """GET /api/v1/sessions?limit=: the caller's conversations, most recently active first.

    Only sessions with at least one turn: a query refused or failed before any answer
    leaves a session whose id its caller never received.
    """

    @extend_schema(
        parameters=query_parameters(SessionList),
        responses=SessionSummarySerializer(many=True),
    )
    def get(self, request: Request) -> Response:
        limit = query_values(request, SessionList).limit
        rows = sessions_list(tenant_id=request_api_key(request).tenant_id, limit=limit)
        return Response(SessionSummarySerializer(rows, many=True).data)

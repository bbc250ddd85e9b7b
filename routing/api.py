"""REST doors for routing: the universal query, the dry run, sessions, decisions,
and seed 004's query-router endpoints. Each calls the routing services."""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import AsyncIterator
from typing import Any

from django.conf import settings
from django.http import HttpRequest, JsonResponse, StreamingHttpResponse
from django.http.response import HttpResponseBase
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_view
from rest_framework import serializers
from rest_framework.generics import ListAPIView
from rest_framework.pagination import LimitOffsetPagination
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from analytics.models import Outcome, RoutingDecision
from analytics.selectors import decision_get, decisions_for
from chatflows.chatflow_api import backend_param, body_of
from flywheel.asyncapi import async_api, json_body
from flywheel.asyncdb import db
from flywheel.authentication import request_api_key
from flywheel.errors import NotFoundError, ValidationError
from flywheel.models import ApiKey
from routing import querytype_service
from routing.requests import query_request, query_type_request
from routing.service import (
    answer_question,
    query_refused,
    route_question,
    run_flow,
    stream_answer,
)
from routing.sessions import session_get


def _absolute(request: HttpRequest, body: dict[str, Any]) -> dict[str, Any]:
    if "trace_url" in body:
        base = settings.PUBLIC_URL or request.build_absolute_uri("/").rstrip("/")
        body["trace_url"] = f"{base}{body['trace_url']}"
    return body


def _sse(event: str, data: dict[str, Any]) -> str:
    return f"event: {event}\ndata: {json.dumps(data)}\n\n"


async def _events(
    request: HttpRequest, events: AsyncIterator[dict[str, Any]]
) -> AsyncIterator[str]:
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
            _events(request, stream_answer(query_req, tenant=tenant)),
            content_type="text/event-stream",
        )
        response["Cache-Control"] = "no-cache"
        response["X-Accel-Buffering"] = "no"
        return response
    body = await answer_question(query_req, tenant=tenant)
    return JsonResponse(_absolute(request, body))


@async_api("POST")
async def route(request: HttpRequest, api_key: ApiKey) -> HttpResponseBase:
    """POST /api/v1/route: classify and score without running anything."""
    query_req = query_request(json_body(request))
    tenant = api_key.tenant  # loaded with the key
    return JsonResponse(await route_question(query_req, tenant=tenant))


PREDICT_FIELDS = {"question", "session_id", "fallback", "include_routing_metadata"}


@async_api("POST")
async def chatflow_predict(
    request: HttpRequest, api_key: ApiKey, chatflow_id: str
) -> HttpResponseBase:
    """POST /api/v1/chatflows/{id}/predict: run that flow (a routed query with its flow
    given: recorded and measured like any other; no fallback unless asked)."""
    body = body_of(request, PREDICT_FIELDS)
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
    result = await querytype_service.route_query_type(question, tenant_slug=tenant.slug)
    return JsonResponse(result)


@async_api("GET")
async def query_router_patterns(request: HttpRequest, api_key: ApiKey) -> HttpResponseBase:
    """GET /api/v1/query-router/patterns: the GLOBAL and LOCAL rules in use."""
    _router_enabled()
    return JsonResponse(await db(querytype_service.patterns)())


@async_api("GET")
async def query_router_status(request: HttpRequest, api_key: ApiKey) -> HttpResponseBase:
    """GET /api/v1/query-router/status: configuration, whether enabled or not."""
    return JsonResponse(await db(querytype_service.status)())


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


class DecisionSerializer(serializers.ModelSerializer):
    backend = serializers.CharField(source="backend.name", allow_null=True, default=None)
    flow = serializers.CharField(source="flow.name", allow_null=True, default=None)
    session_id = serializers.UUIDField(allow_null=True)

    class Meta:
        model = RoutingDecision
        fields = [
            "request_id",
            "created_at",
            "session_id",
            "question",
            "intent",
            "intent_confidence",
            "intent_method",
            "query_type",
            "query_type_confidence",
            "evidence",
            "routing_method",
            "backend",
            "flow",
            "score",
            "candidates",
            "fallback_chain",
            "outcome",
            "error_type",
            "classify_ms",
            "route_ms",
            "execute_ms",
            "total_ms",
        ]


_DIGITS = re.compile(r"[0-9]{1,10}")  # ASCII only: int() would take "٣" as 3


class StrictLimitOffsetPagination(LimitOffsetPagination):
    """DRF's limit/offset pages, but a ``limit`` or ``offset`` that is not an integer in
    range is a 400 naming it (DRF's own silently falls back to its defaults).

    ``limit``: 1 to max_limit (default default_limit); ``offset``: 0 to max_offset.
    """

    default_limit: int = 50
    max_limit: int = 500
    max_offset = 2**31 - 1  # an int32, as the schema says; far past any real page

    def _integer(self, request: Request, name: str, low: int, high: int, default: int) -> int:
        raw = request.query_params.get(name)
        if raw is None:
            return default
        if not _DIGITS.fullmatch(raw) or not low <= int(raw) <= high:
            rule = f"Must be an integer from {low} to {high}."
            raise ValidationError(
                f"The {name} parameter is not valid.", details={"fields": {name: rule}}
            )
        return int(raw)

    def get_limit(self, request: Request) -> int:
        name, default = self.limit_query_param, self.default_limit
        return self._integer(request, name, 1, self.max_limit, default)

    def get_offset(self, request: Request) -> int:
        return self._integer(request, self.offset_query_param, 0, self.max_offset, 0)

    def get_schema_operation_parameters(self, view: Any) -> list[dict[str, Any]]:
        parameters = super().get_schema_operation_parameters(view)
        bounds = {
            self.limit_query_param: {"minimum": 1, "maximum": self.max_limit},
            self.offset_query_param: {"minimum": 0, "maximum": self.max_offset},
        }
        for parameter in parameters:
            parameter["schema"].update(format="int32", **bounds.get(parameter["name"], {}))
        return parameters


class DecisionPagination(StrictLimitOffsetPagination):
    """Decisions: 50 a page unless ``limit`` says otherwise, 500 at most."""


@extend_schema_view(
    get=extend_schema(
        parameters=[
            OpenApiParameter("intent", {"type": "string", "pattern": "^[-a-z0-9_]{1,50}$"}),
            OpenApiParameter("outcome", str, enum=Outcome.values),
            OpenApiParameter(
                "backend", {"type": "string", "maxLength": 100}, description="A backend's name."
            ),
            OpenApiParameter("session", {"type": "string", "format": "uuid"}),
        ]
    )
)
class DecisionListView(ListAPIView):
    """GET /api/v1/decisions?intent=&outcome=&backend=&session=: the tenant's decisions."""

    serializer_class = DecisionSerializer
    pagination_class = DecisionPagination

    def get_queryset(self) -> Any:
        params = self.request.query_params
        return decisions_for(
            request_api_key(self.request).tenant,
            intent=params.get("intent"),
            outcome=params.get("outcome"),
            backend=params.get("backend"),
            session_id=params.get("session"),
        )


class DecisionDetailView(APIView):
    """GET /api/v1/decisions/{request_id}."""

    @extend_schema(responses=DecisionSerializer)
    def get(self, request: Request, request_id: str) -> Response:
        decision = decision_get(request_api_key(request).tenant, request_id)
        return Response(DecisionSerializer(decision).data)

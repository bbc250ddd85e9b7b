"""REST doors for reading routing decisions: the tenant's list, and one by request id.

Routing writes the decisions (routing.models); these views only read them,
through analytics.selectors.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import (
    OpenApiParameter,
    extend_schema,
    extend_schema_field,
    extend_schema_view,
)
from rest_framework import serializers
from rest_framework.generics import ListAPIView
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from analytics.selectors import decision_get, decisions_for
from flywheel.authentication import request_api_key
from flywheel.rest import StrictLimitOffsetPagination, absolute_url
from routing.models import Outcome, RoutingDecision
from routing.service import trace_path


# Needs the request in its context, for trace_url (the docstring would be published).
class DecisionSerializer(serializers.ModelSerializer):
    backend = serializers.CharField(source="backend.name", allow_null=True, default=None)
    flow = serializers.CharField(source="flow.name", allow_null=True, default=None)
    session_id = serializers.UUIDField(allow_null=True)
    trace_url = serializers.SerializerMethodField(
        help_text="The decision's trace page, as the answer gave it (for staff with the "
        "permission to view routing decisions)."
    )

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
            "trace_url",
        ]

    @extend_schema_field(OpenApiTypes.URI)
    def get_trace_url(self, decision: RoutingDecision) -> str:
        return absolute_url(self.context["request"], trace_path(decision.request_id))


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
        return Response(DecisionSerializer(decision, context={"request": request}).data)

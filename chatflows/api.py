"""REST door for discovered flows."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from chatflows.selectors import flows_visible_to
from flywheel.authentication import request_api_key


class FlowSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    backend = serializers.CharField(source="backend.name")
    backend_id = serializers.IntegerField()
    external_id = serializers.CharField()
    name = serializers.CharField()
    flow_type = serializers.CharField()
    deployed = serializers.BooleanField()
    description = serializers.CharField()
    endpoint_name = serializers.CharField()
    intent_keywords = serializers.ListField(child=serializers.CharField())
    scope = serializers.CharField()
    is_generic = serializers.BooleanField()
    last_seen_at = serializers.DateTimeField()


class FlowListView(APIView):
    """Active flows on the backends the caller may use."""

    @extend_schema(
        parameters=[
            OpenApiParameter(
                "backend", {"type": "string", "maxLength": 100}, description="Backend id or name."
            ),
            OpenApiParameter(
                "intent",
                {"type": "string", "pattern": "^[-a-z0-9_]{1,50}$"},
                description="Only flows that serve this intent.",
            ),
        ],
        responses=FlowSerializer(many=True),
    )
    def get(self, request: Request) -> Response:
        flows = flows_visible_to(
            request_api_key(request).tenant,
            backend=request.query_params.get("backend") or None,
            intent=request.query_params.get("intent") or None,
        )
        return Response(FlowSerializer(flows, many=True).data)

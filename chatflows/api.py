"""REST doors for discovered flows: listing them, setting how routing uses one of the
caller's own (PATCH /api/v1/flows/{id}), and discovering a backend's now."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from backends.adapters import adapter_class
from backends.api import only_result
from backends.models import Backend
from backends.selectors import backend_get_for
from chatflows.filters import FlowFilters
from chatflows.models import Flow
from chatflows.routing_contract import FlowRoutingChange
from chatflows.selectors import flows_visible_to
from chatflows.services import flow_routing_change, flows_discover_now
from flywheel.authentication import request_api_key
from flywheel.openapi import query_parameters


class FlowSerializer(serializers.Serializer):
    """A discovered flow, as Flywheel routes to it."""

    id = serializers.IntegerField(help_text="Flywheel's id for the flow.")
    backend = serializers.CharField(source="backend.name")
    backend_id = serializers.IntegerField()
    external_id = serializers.CharField(help_text="The flow's id on its backend.")
    name = serializers.CharField()
    flow_type = serializers.SerializerMethodField(
        help_text="Its type as every door shows it (a Langflow flow: FLOW, Langflow having none)."
    )
    deployed = serializers.BooleanField()
    description = serializers.CharField()
    endpoint_name = serializers.CharField()
    intent_keywords = serializers.ListField(child=serializers.CharField())
    scope = serializers.CharField(help_text="global, local or any: the query type it serves.")
    scope_edited = serializers.BooleanField(
        help_text="The scope was set by hand; discovery will not derive it again."
    )
    is_generic = serializers.BooleanField()
    last_seen_at = serializers.DateTimeField()

    def get_flow_type(self, flow: Flow) -> str:
        return adapter_class(flow.backend.kind).shown_type(flow.flow_type)


class FlowListView(APIView):
    """Active flows on the backends the caller may use."""

    @extend_schema(parameters=query_parameters(FlowFilters), responses=FlowSerializer(many=True))
    def get(self, request: Request) -> Response:
        flows = flows_visible_to(
            request_api_key(request).tenant,
            backend=request.query_params.get("backend"),
            intent=request.query_params.get("intent"),
        )
        return Response(FlowSerializer(flows, many=True).data)


class FlowView(APIView):
    """PATCH /api/v1/flows/{id}: how routing uses one of the caller's own flows."""

    queryset = Flow.objects.none()  # only tells the schema generator the id's type

    @extend_schema(request=FlowRoutingChange, responses=FlowSerializer)
    def patch(self, request: Request, pk: str) -> Response:
        """Set a flow's scope, whether it is generic, or the intents it serves (only what
        the body names). Flows on shared backends are set by an administrator."""
        flow = flow_routing_change(
            tenant=request_api_key(request).tenant, flow_id=pk, changes=request.data
        )
        return Response(FlowSerializer(flow).data)


class DiscoveryReportSerializer(serializers.Serializer):
    backend = serializers.CharField()
    added = serializers.IntegerField()
    updated = serializers.IntegerField()
    removed = serializers.IntegerField()
    unchanged = serializers.IntegerField()
    skipped = serializers.IntegerField(
        help_text="Flows the backend listed that Flywheel cannot keep (a field past its "
        "limit, a NUL character): not discovered, each logged with the field."
    )
    total = serializers.IntegerField()


class BackendDiscoverView(APIView):
    """POST /api/v1/backends/{id}/discover: under the backends' URLs, served here because
    discovery is chatflows' (flywheel/urls.py wires it beside the backends router)."""

    queryset = Backend.objects.none()  # only tells the schema generator the id's type

    @extend_schema(request=None, responses=DiscoveryReportSerializer)
    def post(self, request: Request, pk: str) -> Response:
        """Discover the flows of one of the caller's own backends now (at most once per 30 s)."""
        tenant = request_api_key(request).tenant
        report = only_result(
            flows_discover_now(backends=[backend_get_for(tenant, pk)], tenant=tenant)
        )
        return Response(DiscoveryReportSerializer(report).data)

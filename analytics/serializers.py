"""How the decisions REST API shows a decision (analytics/api.py)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from flywheel.rest import absolute_url
from routing.answering.query import trace_path
from routing.models import RoutingDecision
from routing.recording.compact import read


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

    def to_representation(self, instance: RoutingDecision) -> dict[str, Any]:
        """The evidence, candidates and fallback chain as they read whichever shape the
        row keeps them in (routing.recording.compact); the names of a page's backends,
        flows and rules come from the context's ``names`` when the list gives them."""
        shown: dict[str, Any] = super().to_representation(instance)
        kept = read(instance, self.context.get("names"))
        shown.update(
            evidence=kept.evidence, candidates=kept.candidates, fallback_chain=kept.fallback_chain
        )
        return shown

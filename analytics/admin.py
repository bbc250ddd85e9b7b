"""Read-only admin for decisions, performance records and rollups.

Decisions and performance records are routing's models (routing writes them);
their admin pages are read-only pages for reading them, like the trace page,
so they stay here with the rollups' and routing's admin keeps to what routing is
configured with. Django lists them under their app, Routing.
"""

from __future__ import annotations

from django.contrib import admin
from django.utils.html import format_html

from analytics.models import DecisionRollup, RollupState
from flywheel.admin_base import ReadOnlyAdmin
from routing.models import PerformanceRecord, RoutingDecision
from routing.service import trace_path


@admin.register(RoutingDecision)
class RoutingDecisionAdmin(ReadOnlyAdmin):
    list_display = [
        "request_id",
        "created_at",
        "tenant",
        "intent",
        "query_type",
        "backend",
        "outcome",
        "total_ms",
    ]
    list_filter = ["outcome", "intent", "intent_method", "query_type", "routing_method", "tenant"]
    search_fields = ["request_id", "question", "error_type"]
    list_select_related = ["tenant", "backend"]
    date_hierarchy = "created_at"
    readonly_fields = ["trace"]

    @admin.display(description="Trace page")
    def trace(self, decision: RoutingDecision) -> str:
        return format_html(
            '<a href="{}">Open the trace of this decision</a>', trace_path(decision.request_id)
        )


@admin.register(PerformanceRecord)
class PerformanceRecordAdmin(ReadOnlyAdmin):
    list_display = [
        "backend",
        "flow",
        "intent",
        "latency_ms",
        "success",
        "error_type",
        "created_at",
    ]
    list_filter = ["success", "backend", "intent", "error_type"]
    search_fields = ["backend__name", "flow__name", "intent", "error_type"]
    list_select_related = ["backend", "flow"]
    date_hierarchy = "created_at"


@admin.register(DecisionRollup)
class DecisionRollupAdmin(ReadOnlyAdmin):
    list_display = [
        "bucket_start",
        "granularity",
        "tenant",
        "backend",
        "intent",
        "count",
        "successes",
        "fallbacks",
        "cached",
        "latency_sum_ms",
    ]
    list_filter = ["granularity", "tenant", "backend", "intent"]
    search_fields = ["intent", "backend__name"]
    list_select_related = ["tenant", "backend"]
    date_hierarchy = "bucket_start"


@admin.register(RollupState)
class RollupStateAdmin(ReadOnlyAdmin):
    list_display = ["last_decision_id", "refreshed_at"]

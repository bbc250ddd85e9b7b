"""Read-only admin for decisions, performance records and rollups.

Decisions and performance records are routing's models (routing writes them);
their admin pages are read-only pages for reading them, like the trace page,
so they stay here with the rollups' and routing's admin keeps to what routing is
configured with. Django lists them under their app, Routing.
"""

from __future__ import annotations

import json
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils import timezone
from django.utils.html import format_html

from analytics.models import DecisionRollup, RollupState
from flywheel.admin_base import ReadOnlyAdmin, shortened
from flywheel.errors import ValidationError
from routing.answering.query import trace_path
from routing.classification.corrections import decision_correct
from routing.models import Intent, PerformanceRecord, RoutingDecision
from routing.recording.compact import read

# Correcting a decision adds an example the classifier learns from.
CORRECT_PERMISSION = "routing.add_intentexample"


class CorrectionForm(forms.Form):
    intent = forms.ChoiceField(label="The intent was")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        enabled = Intent.objects.filter(enabled=True).order_by("slug")
        field = self.fields["intent"]
        assert isinstance(field, forms.ChoiceField)  # noqa: S101 - declared above
        field.choices = [(i.slug, f"{i.slug} — {i.name}") for i in enabled]


def _json(value: Any) -> str:
    return format_html("<pre>{}</pre>", json.dumps(value, indent=1, ensure_ascii=False))


@admin.register(RoutingDecision)
class RoutingDecisionAdmin(ReadOnlyAdmin):
    list_display = [
        "short_question",
        "when",
        "tenant",
        "intent",
        "backend",
        "outcome",
        "total_time",
        "corrected_intent",
    ]
    list_filter = [
        "outcome",
        "intent",
        "intent_method",
        "corrected_intent",
        "query_type",
        "routing_method",
        "tenant",
    ]
    search_fields = ["request_id", "question", "error_type"]
    list_select_related = ["tenant", "backend"]
    date_hierarchy = "created_at"
    # The JSON columns as they read (routing.recording.compact), not as they are kept.
    exclude = ["evidence", "candidates", "fallback_chain"]
    readonly_fields = ["trace", "correct", "read_evidence", "read_candidates", "read_chain"]

    @admin.display(description="Question", ordering="question")
    def short_question(self, obj: RoutingDecision) -> str:
        return shortened(obj.question, 50)

    @admin.display(description="When", ordering="created_at")
    def when(self, obj: RoutingDecision) -> str:
        return timezone.localtime(obj.created_at).strftime("%m-%d %H:%M:%S")

    @admin.display(description="Total", ordering="total_ms")
    def total_time(self, obj: RoutingDecision) -> str:
        return f"{obj.total_ms:.0f} ms"

    @admin.display(description="Trace page")
    def trace(self, decision: RoutingDecision) -> str:
        return format_html(
            '<a href="{}">Open the trace of this decision</a>', trace_path(decision.request_id)
        )

    @admin.display(description="Evidence")
    def read_evidence(self, decision: RoutingDecision) -> str:
        return _json(read(decision).evidence)

    @admin.display(description="Candidates")
    def read_candidates(self, decision: RoutingDecision) -> str:
        return _json(read(decision).candidates)

    @admin.display(description="Fallback chain")
    def read_chain(self, decision: RoutingDecision) -> str:
        return _json(read(decision).fallback_chain)

    @admin.display(description="Correct the intent")
    def correct(self, decision: RoutingDecision) -> str:
        url = reverse("admin:routing_routingdecision_correct", args=[decision.pk])
        said = f" (corrected to {decision.corrected_intent})" if decision.corrected_intent else ""
        return format_html('<a href="{}">The intent was not {}…</a>{}', url, decision.intent, said)

    def get_urls(self) -> list[URLPattern]:
        correct = path(
            "<int:pk>/correct/",
            self.admin_site.admin_view(self.correct_view),
            name="routing_routingdecision_correct",
        )
        return [correct, *super().get_urls()]

    def correct_view(self, request: HttpRequest, pk: int) -> HttpResponse:
        """Say what the intent was: the question becomes a correction example."""
        if not request.user.has_perm(CORRECT_PERMISSION):
            raise PermissionDenied
        decision = get_object_or_404(RoutingDecision, pk=pk)
        form = CorrectionForm(request.POST or None, initial={"intent": decision.intent})
        if request.method == "POST" and form.is_valid():
            try:
                decision_correct(decision=decision, intent=form.cleaned_data["intent"])
            except ValidationError as err:
                form.add_error("intent", err.message)
            else:
                self.message_user(
                    request,
                    f"Corrected to {decision.corrected_intent}: the question is now an example "
                    "of it, and the classifier is being retrained.",
                    messages.SUCCESS,
                )
                change = reverse("admin:routing_routingdecision_change", args=[decision.pk])
                return HttpResponseRedirect(change)
        context = {
            **self.admin_site.each_context(request),
            "title": "Correct the intent",
            "decision": decision,
            "form": form,
            "opts": self.model._meta,
        }
        return TemplateResponse(request, "admin/flywheel/correct_intent.html", context)


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

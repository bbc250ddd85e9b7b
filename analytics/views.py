"""Pages for people: the trace of one routing decision."""

from __future__ import annotations

import uuid

from django.contrib.admin.views.decorators import staff_member_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render

from analytics.models import RoutingDecision


@staff_member_required
def decision_trace(request: HttpRequest, request_id: uuid.UUID) -> HttpResponse:
    """Everything routing knew and did for one query (staff only: it shows the question)."""
    decision = (
        RoutingDecision.objects.select_related("tenant", "backend", "flow")
        .filter(request_id=request_id)
        .first()
    )
    if decision is None:
        raise Http404("No such decision.")
    return render(request, "analytics/decision_trace.html", {"decision": decision})

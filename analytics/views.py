"""Pages for people: the trace of one routing decision."""

from __future__ import annotations

import uuid

from django.contrib.admin.views.decorators import staff_member_required
from django.contrib.auth.decorators import permission_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render

from routing.models import RoutingDecision


# Being staff is not enough: the page shows any tenant's question and routing.
@staff_member_required
@permission_required("routing.view_routingdecision", raise_exception=True)
def decision_trace(request: HttpRequest, request_id: uuid.UUID) -> HttpResponse:
    """Everything routing knew and did for one query.

    Needs a staff login with the permission to view routing decisions:
    anonymous and non-staff users are redirected to the login page, staff
    without the permission get 403 (before anything is looked up).
    """
    decision = (
        RoutingDecision.objects.select_related("tenant", "backend", "flow")
        .filter(request_id=request_id)
        .first()
    )
    if decision is None:
        raise Http404("No such decision.")
    return render(request, "analytics/decision_trace.html", {"decision": decision})

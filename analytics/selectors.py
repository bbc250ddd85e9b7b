"""Reads of routing decisions, always scoped to the caller's tenant.

Decisions are written behind the answers; each read first lets this
process's pending writes land, so a client reading right after its answer
finds it (another process's land within milliseconds).
"""

from __future__ import annotations

import uuid

from django.db.models import QuerySet

from analytics.models import RoutingDecision
from flywheel.errors import NotFoundError
from flywheel.models import Tenant
from routing.recording import settle
from routing.sessions import session_key


def decisions_for(
    tenant: Tenant,
    *,
    intent: str | None = None,
    outcome: str | None = None,
    backend: str | None = None,
    session_id: str | None = None,
) -> QuerySet[RoutingDecision]:
    """The tenant's decisions, newest first, optionally filtered.

    Raises ValidationError for a session id that is not a UUID.
    """
    settle()
    decisions = (
        RoutingDecision.objects.filter(tenant=tenant)
        .select_related("backend", "flow")
        .order_by("-created_at", "-id")
    )
    if intent:
        decisions = decisions.filter(intent=intent)
    if outcome:
        decisions = decisions.filter(outcome=outcome)
    if backend:
        decisions = decisions.filter(backend__name__iexact=backend)
    if session_id:
        decisions = decisions.filter(session_id=session_key(session_id))
    return decisions


def decision_get(tenant: Tenant, request_id: str) -> RoutingDecision:
    """One of the tenant's decisions by request id. Raises NotFoundError otherwise."""
    try:
        key = uuid.UUID(str(request_id))
    except ValueError as err:
        raise NotFoundError(f"No decision {request_id}.") from err
    decision = decisions_for(tenant).filter(request_id=key).first()
    if decision is None:
        raise NotFoundError(f"No decision {key}.", details={"request_id": str(key)})
    return decision

"""Reads of routing decisions, always scoped to the caller's tenant.

Decisions are written behind the answers; each read first lets this
process's pending writes land, so a client reading right after its answer
finds it (another process's land within milliseconds).
"""

from __future__ import annotations

import uuid

from django.db.models import QuerySet

from analytics.filters import DecisionFilters
from analytics.retention import decision_missing
from flywheel.contract import validated_filters
from flywheel.errors import NotFoundError
from flywheel.models import Tenant
from routing.answering.sessions import session_key
from routing.models import RoutingDecision, with_request_id
from routing.recording.own_writes import reads_own_writes


@reads_own_writes
def decisions_for(
    tenant: Tenant | None,
    *,
    intent: str | None = None,
    outcome: str | None = None,
    backend: str | None = None,
    session_id: str | None = None,
) -> QuerySet[RoutingDecision]:
    """The tenant's decisions (every tenant's for None: staff), newest first, optionally
    filtered (analytics.filters: a value that matches nothing is an empty result, an
    empty one no filter).

    Raises ValidationError naming the filter (``intent``, ``outcome``,
    ``backend`` or ``session``) whose value no decision could have.
    """
    validated_filters(DecisionFilters, intent=intent, outcome=outcome, backend=backend)
    session = session_key(session_id, field="session") if session_id else None
    decisions = RoutingDecision.objects.select_related("backend", "flow").order_by(
        "-created_at", "-id"
    )
    if tenant is not None:
        decisions = decisions.filter(tenant=tenant)
    if intent:
        decisions = decisions.filter(intent=intent)
    if outcome:
        decisions = decisions.filter(outcome=outcome)
    if backend:
        decisions = decisions.filter(backend__name__iexact=backend)
    if session is not None:
        decisions = decisions.filter(session_id=session)
    return decisions


def decision_get(tenant: Tenant, request_id: str) -> RoutingDecision:
    """One of the tenant's decisions by request id. Raises NotFoundError otherwise."""
    try:
        key = uuid.UUID(str(request_id))
    except ValueError as err:
        raise NotFoundError(f"No decision {str(request_id)[:40]!r}.") from err
    decision = with_request_id(decisions_for(tenant), key).first()
    if decision is None:
        raise decision_missing(key)
    return decision

"""Reads of discovered flows, scoped by tenant."""

from __future__ import annotations

from django.db.models import Q

from chatflows.models import Flow
from flywheel.models import Tenant


def flows_visible_to(
    tenant: Tenant, *, backend: str | None = None, intent: str | None = None
) -> list[Flow]:
    """Active flows on shared and the tenant's own backends.

    ``backend`` is an id or a name; ``intent`` keeps flows whose keywords name
    it, plus generic flows (they serve any intent).
    """
    flows = (
        Flow.objects.active()
        .filter(Q(backend__tenant__isnull=True) | Q(backend__tenant=tenant))
        .select_related("backend")
        .order_by("backend__name", "name")
    )
    if backend:
        flows = flows.filter(
            Q(backend__name__iexact=backend) | Q(backend_id=int(backend))
            if backend.isdigit()
            else Q(backend__name__iexact=backend)
        )
    result = list(flows)
    if intent:
        # Filtered here, not in SQL: JSON containment is not portable to SQLite.
        result = [f for f in result if f.is_generic or intent in f.intent_keywords]
    return result

"""Reads of discovered flows, scoped by tenant."""

from __future__ import annotations

import re

from django.db.models import Q

from chatflows.filters import FlowFilters
from chatflows.models import Flow
from flywheel.contract import validated_filters
from flywheel.models import Tenant

# ASCII digits only ("²".isdigit() is true), and few enough to fit a bigint.
_BACKEND_ID = re.compile(r"[0-9]{1,18}")


def flows_visible_to(
    tenant: Tenant, *, backend: str | None = None, intent: str | None = None
) -> list[Flow]:
    """Active flows on shared and the tenant's own backends.

    ``backend`` is an id or a name; ``intent`` keeps flows whose keywords name
    it, plus generic flows (they serve any intent). A value that matches
    nothing is an empty list, an empty one no filter (chatflows.filters). Raises
    ValidationError naming ``backend`` or ``intent`` when its value is one no flow
    could match.
    """
    filters = validated_filters(FlowFilters, backend=backend, intent=intent)
    backend, intent = filters.backend, filters.intent
    flows = (
        Flow.objects.active()
        .filter(Q(backend__tenant__isnull=True) | Q(backend__tenant=tenant))
        .select_related("backend")
        .order_by("backend__name", "name")
    )
    if backend:
        by_name = Q(backend__name__iexact=backend)
        flows = flows.filter(
            by_name | Q(backend_id=int(backend)) if _BACKEND_ID.fullmatch(backend) else by_name
        )
    result = list(flows)
    if intent:
        # Filtered here, not in SQL: JSON containment is not portable to SQLite.
        result = [f for f in result if f.is_generic or intent in f.intent_keywords]
    return result

"""Reads of discovered flows, scoped by tenant."""

from __future__ import annotations

import re

from django.db.models import Q

from backends.selectors import as_id
from chatflows.filters import FlowFilters
from chatflows.models import Flow
from flywheel.contract import validated_filters
from flywheel.errors import NotFoundError, PermissionDeniedError
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


def flow_get_editable(tenant: Tenant, flow_id: int | str, *, lock: bool = False) -> Flow:
    """An active flow on one of ``tenant``'s own backends, which its key may change (REST's
    PATCH /api/v1/flows/{id} and MCP's ``set_flow_routing`` ask here); ``lock`` holds its
    row until the transaction ends.

    Raises NotFoundError for a flow the tenant cannot see (another tenant's, removed, no
    such id: no existence leak), PermissionDeniedError for one on a shared backend
    (an administrator's to change).
    """
    pk = as_id(flow_id)
    flows = Flow.objects.active().filter(
        Q(backend__tenant__isnull=True) | Q(backend__tenant=tenant)
    )
    if lock:
        flows = flows.select_for_update(of=("self",))
    flow = None if pk is None else flows.select_related("backend").filter(pk=pk).first()
    if flow is None:
        shown = str(flow_id)[:40]
        raise NotFoundError(f"No flow with id {shown}.", details={"id": shown})
    if flow.backend.tenant_id is None:
        raise PermissionDeniedError(
            "The flow is on a shared backend: its routing is set by an administrator.",
            details={"id": flow.pk, "backend": flow.backend.name},
        )
    return flow

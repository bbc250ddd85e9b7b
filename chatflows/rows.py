"""Keeping one Flow row in step with what its backend reported.

Discovery applies a whole list at once (chatflows/services.py); the lifecycle
services apply the one record a write returned (chatflows/lifecycle.py).
Both go through :func:`flow_apply`, so a flow looks the same whichever way
Flywheel learnt of it.
"""

from __future__ import annotations

from datetime import datetime

from django.db import transaction
from django.utils import timezone

from backends.adapters.records import DiscoveredFlow
from backends.models import Backend
from chatflows.keywords import flow_keywords
from chatflows.models import Flow
from chatflows.scope import flow_scope

SYNCED_FIELDS = ("name", "flow_type", "deployed", "description", "endpoint_name")
# DiscoveredFlow's name of a field -> the Flow row's, where they differ.
ROW_FIELDS = {"created": "backend_created"}


def flow_apply(flow: Flow, item: DiscoveredFlow, now: datetime) -> bool:
    """Copy what the backend reported onto ``flow`` (not saved); True if anything changed.

    Intent keywords and the scope (chatflows/scope.py) are derived again unless they
    were set by hand; a flow marked removed is active again.
    """
    changed = flow.pk is None or flow.removed_at is not None
    for field in (*SYNCED_FIELDS, *ROW_FIELDS):
        column = ROW_FIELDS.get(field, field)
        if getattr(flow, column) != getattr(item, field):
            setattr(flow, column, getattr(item, field))
            changed = True
    tunable = [list(triple) for triple in item.tunable]
    if flow.tunable != tunable:
        flow.tunable = tunable
        changed = True
    if not flow.scope_edited:
        scope = flow_scope(name=item.name, description=item.description, node_kinds=item.node_kinds)
        if scope != flow.scope:
            flow.scope = scope
            changed = True
    if not flow.keywords_edited:
        keywords = flow_keywords(
            name=flow.name, description=flow.description, endpoint_name=flow.endpoint_name
        )
        if keywords != flow.intent_keywords:
            flow.intent_keywords = keywords
            changed = True
    flow.removed_at = None
    flow.last_seen_at = now
    return changed


@transaction.atomic
def flow_upsert(*, backend: Backend, item: DiscoveredFlow) -> Flow:
    """Create or update the row of one flow the backend just reported."""
    flow = (
        Flow.objects.select_for_update()
        .filter(backend=backend, external_id=item.external_id)
        .first()
    ) or Flow(backend=backend, external_id=item.external_id)
    flow_apply(flow, item, timezone.now())
    flow.save()
    return flow


def flow_mark_removed(*, backend: Backend, external_id: str) -> int:
    """Mark the flow gone from its backend (rows are kept: decisions point at them)."""
    return Flow.objects.filter(
        backend=backend, external_id=external_id, removed_at__isnull=True
    ).update(removed_at=timezone.now())

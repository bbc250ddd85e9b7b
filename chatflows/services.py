"""Flow discovery: keep Flow rows in step with what each backend really has.

Every door calls these: beat (chatflows/tasks.py), the ``discover_flows``
command, the REST route POST /api/v1/backends/{id}/discover (chatflows/api.py)
and the admin's "discover flows now" action (chatflows/admin.py).

How routing uses a flow (generic, its intents, its scope) is set by hand through
:func:`flow_routing_set` alone: the admin, ``set_flow``, and, for a tenant's key on its
own flows, :func:`flow_routing_change` (REST's PATCH /api/v1/flows/{id}, MCP's
``set_flow_routing``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from asgiref.sync import sync_to_async
from django.db import transaction
from django.utils import timezone

from backends.adapters import get_adapter
from backends.adapters.records import DiscoveredFlow
from backends.errors import BackendError
from backends.models import Backend
from backends.on_demand import DISCOVERY, on_demand_run
from backends.services import DEFAULT_CONCURRENCY, backend_config, gather_bounded
from chatflows import snapshot
from chatflows.models import Flow, FlowScope
from chatflows.routing_contract import FlowRoutingChange
from chatflows.rows import flow_apply
from chatflows.selectors import flow_get_editable
from flywheel.contract import validated
from flywheel.errors import ApplicationError, ValidationError
from flywheel.models import Tenant


@dataclass(frozen=True)
class DiscoveryReport:
    """One backend's discovery: ``skipped`` counts the records it listed that Flywheel
    cannot keep (a field past its limit, a NUL character), each logged by name."""

    backend: str
    added: int
    updated: int
    removed: int
    unchanged: int
    skipped: int = 0

    @property
    def total(self) -> int:
        return self.added + self.updated + self.unchanged

    @property
    def counts(self) -> str:
        """The changes in words, for a person (the command, the admin)."""
        words = f"{self.added} added, {self.updated} updated, {self.removed} removed"
        return words + (f", {self.skipped} skipped (see the log)" if self.skipped else "")


@transaction.atomic
def flows_sync(*, backend: Backend, discovered: Iterable[DiscoveredFlow]) -> DiscoveryReport:
    """Upsert the discovered flows of ``backend``; mark vanished ones removed.

    Flows are never deleted (decisions point at them). Intent keywords are
    derived from name, description and endpoint name (chatflows/keywords.py)
    unless edited by hand.
    A flow that comes back after being removed is active again.
    """
    now = timezone.now()
    existing = {f.external_id: f for f in Flow.objects.select_for_update().filter(backend=backend)}
    added = updated = unchanged = 0
    seen: set[str] = set()
    for item in discovered:
        seen.add(item.external_id)
        flow = existing.get(item.external_id)
        if flow is None:
            flow = Flow(backend=backend, external_id=item.external_id)
            added += 1
        changed = flow_apply(flow, item, now)
        if flow.pk is not None:
            updated += changed
            unchanged += not changed
        flow.save()
    removed = (
        Flow.objects.filter(backend=backend, removed_at__isnull=True)
        .exclude(external_id__in=seen)
        .update(removed_at=now)
    )
    return DiscoveryReport(backend.name, added, updated, removed, unchanged)


async def adiscover(backend: Backend) -> DiscoveryReport:
    """Discover one backend's flows, store them and publish them for routing.

    Records the adapter skipped are counted in the report; past a discovery limit it
    raises BackendUnexpectedError and the rows stay as they were.
    """
    found = await get_adapter(backend_config(backend)).discover_flows()
    report = await sync_to_async(flows_sync)(backend=backend, discovered=found.flows)
    await sync_to_async(snapshot.publish_flows)()
    return replace(report, skipped=len(found.skipped))


async def adiscover_all(
    backends: Iterable[Backend] | None = None, *, concurrency: int = DEFAULT_CONCURRENCY
) -> list[DiscoveryReport | BackendError]:
    """Discover every enabled backend (or those given) concurrently, with a bound."""
    if backends is None:
        backends = [b async for b in Backend.objects.filter(enabled=True)]
    return await gather_bounded(list(backends), adiscover, concurrency)


def flows_discover_now(
    *, backends: Sequence[Backend], tenant: Tenant | None = None
) -> list[DiscoveryReport | ApplicationError]:
    """Discover backends' flows now for a person: REST (``tenant``, the caller's) or the
    admin (None), within the on-demand limits (backends/on_demand.py).

    Each slot holds the report or the error that stopped it: PermissionDeniedError,
    RateLimitError or a BackendError.
    """
    return on_demand_run(backends=backends, tenant=tenant, operation=DISCOVERY, run=adiscover_all)


def keyword_list(words: Iterable[str]) -> list[str]:
    """Intent keywords as stored: trimmed, lower case, without blanks or repeats."""
    keywords: list[str] = []
    for word in words:
        word = word.strip().lower()
        if word and word not in keywords:
            keywords.append(word)
    return keywords


def flow_routing_set(
    *,
    flow: Flow,
    is_generic: bool | None = None,
    intent_keywords: Iterable[str] | None = None,
    scope: str | None = None,
) -> Flow:
    """Set how routing uses ``flow`` (None leaves a field as it is): ``is_generic`` (it
    serves any intent, at a reduced match), the intents it serves, and its ``scope``
    (global, local or any: the query type it is made for). Keywords and a scope set here
    are kept by later discoveries. The admin's flow form, ``set_flow``, REST's
    PATCH /api/v1/flows/{id} and MCP's ``set_flow_routing`` call this; a scope that is
    not one of the three is a ValidationError.
    """
    if scope is not None:
        if scope not in FlowScope.values:
            raise ValidationError(
                f"Unknown scope {scope!r}: one of {', '.join(FlowScope.values)}.",
                details={"field": "scope", "allowed": list(FlowScope.values)},
            )
        flow.scope, flow.scope_edited = scope, True
    if is_generic is not None:
        flow.is_generic = is_generic
    if intent_keywords is not None:
        keywords = keyword_list(intent_keywords)
        if keywords != flow.intent_keywords:
            flow.intent_keywords = keywords
            flow.keywords_edited = True
    flow.save()  # its signal drops the published flows: routing sees it within a second
    return flow


NOTHING_TO_SET = "Say what to set: scope, is_generic or intent_keywords."


@transaction.atomic
def flow_routing_change(*, tenant: Tenant, flow_id: int | str, changes: Any) -> Flow:
    """Set how routing uses one of ``tenant``'s own flows, from what a tenant's key sent
    (``changes``: REST's PATCH /api/v1/flows/{id} body, MCP's ``set_flow_routing``
    arguments), validated with chatflows.routing_contract.FlowRoutingChange.

    Raises NotFoundError or PermissionDeniedError as chatflows.selectors.flow_get_editable
    does, and ValidationError for a bad value or nothing to set; then nothing changes.
    """
    flow = flow_get_editable(tenant, flow_id, lock=True)
    given = {
        name: value
        for name, value in validated(FlowRoutingChange, changes).model_dump().items()
        if value is not None
    }
    if not given:
        raise ValidationError(
            NOTHING_TO_SET,
            details={"allowed": list(FlowRoutingChange.model_fields)},
        )
    return flow_routing_set(flow=flow, **given)

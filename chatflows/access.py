"""Which backend and flow a caller of the lifecycle may act on.

``tenant`` is the caller's (None: staff, from the admin or a command). A
tenant reads flows on shared backends and its own, and writes only on its
own. Only backends of a kind with an adapter count (backends/adapters/).
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import Q

from backends.adapters import adapter_class, generating_kinds, kinds
from backends.models import Backend
from backends.selectors import as_id
from chatflows.contract import invalid
from chatflows.models import Flow
from flywheel.errors import NotFoundError, PermissionDeniedError, ValidationError
from flywheel.models import Tenant


@dataclass(frozen=True)
class Target:
    """A flow (or, for create, only a backend) the caller may act on."""

    backend: Backend
    external_id: str = ""
    flow: Flow | None = None


def visible(tenant: Tenant | None) -> Q:
    return Q() if tenant is None else Q(tenant__isnull=True) | Q(tenant=tenant)


def find_backend(tenant: Tenant | None, backend: str) -> Backend:
    """A backend the caller may see, by name (its own before a shared one of that name),
    else by id: as routing.selection.planning reads a query's backend."""
    candidates = Backend.objects.filter(visible(tenant), kind__in=kinds())
    pk = as_id(backend)
    found = candidates.filter(Q(name__iexact=backend) | Q(pk=pk) if pk else Q(name__iexact=backend))
    wanted = backend.lower()
    ordered = sorted(found, key=lambda b: (b.name.lower() != wanted, b.tenant_id is None, b.pk))
    if not ordered:
        raise NotFoundError(f"No backend {backend!r}.", details={"backend": backend})
    return ordered[0]


def may_write(tenant: Tenant | None, backend: Backend) -> None:
    if tenant is not None and backend.tenant_id != tenant.pk:
        raise PermissionDeniedError(
            f"Flows on the shared backend {backend.name!r} are managed by an administrator; "
            "a key manages flows only on its own backends.",
            details={"backend": backend.name},
        )


def resolve_flow(
    *, tenant: Tenant | None, flow_id: str, backend: str | None = None, write: bool = False
) -> Target:
    """The flow ``flow_id`` names: a backend's own id for it, or Flywheel's Flow id.

    With ``backend`` the id is looked up on that backend, even if discovery
    has not seen the flow yet; without it, among the flows Flywheel knows on
    the backends the caller may see. Raises NotFoundError (unknown, or not
    visible: no existence leak), ValidationError (the id is on several
    backends: name one), PermissionDeniedError (``write`` on a shared
    backend by a tenant).
    """
    known = Flow.objects.active().filter(backend__in=Backend.objects.filter(visible(tenant)))
    known = known.filter(backend__kind__in=kinds()).select_related("backend")
    if backend is not None:
        chosen = find_backend(tenant, backend)
        row = known.filter(backend=chosen, external_id=flow_id).first()
        pk = as_id(flow_id)
        if row is None and pk is not None:
            row = known.filter(backend=chosen, pk=pk).first()
        target = Target(chosen, row.external_id if row else flow_id, row)
    else:
        rows = list(known.filter(external_id=flow_id))
        pk = as_id(flow_id)
        if not rows and pk is not None:
            rows = list(known.filter(pk=pk))
        if not rows:
            raise NotFoundError(
                f"No flow {flow_id!r} on the backends you can use. If it was made on the "
                "backend just now, name the backend.",
                details={"chatflow_id": flow_id},
            )
        rows = _one_flow(rows, tenant)
        if len(rows) > 1:
            raise ValidationError(
                f"Flow id {flow_id!r} is on several backends: name one.",
                details={"chatflow_id": flow_id, "backends": sorted(r.backend.name for r in rows)},
            )
        target = Target(rows[0].backend, rows[0].external_id, rows[0])
    if write:
        may_write(tenant, target.backend)
    return target


def _one_flow(rows: list[Flow], tenant: Tenant | None) -> list[Flow]:
    """A flow id found on several backends: the row on the caller's own backend, when
    exactly one is (a tenant that registered a shared server again for itself, to manage
    its flows); else, when every backend is the same server (kind and address), that
    server's flow once, on the first backend by name. Otherwise ``rows`` as they are."""
    if len(rows) < 2:
        return rows
    own = [r for r in rows if tenant is not None and r.backend.tenant_id == tenant.pk]
    if len(own) == 1:
        return own
    servers = {(r.backend.kind, r.backend.base_url.rstrip("/")) for r in rows}
    return sorted(rows, key=lambda r: r.backend.name)[:1] if len(servers) == 1 else rows


def resolve_backend_for_create(*, tenant: Tenant | None, backend: str | None) -> Backend:
    """Where a new flow goes: the named backend, or the caller's only writable one."""
    if backend is not None:
        chosen = find_backend(tenant, backend)
        may_write(tenant, chosen)
        return chosen
    owned = Q() if tenant is None else Q(tenant=tenant)
    writable = list(Backend.objects.filter(owned, kind__in=kinds(), enabled=True).order_by("name"))
    if len(writable) != 1:
        raise invalid(
            "backend",
            "Name the backend to create the flow on: "
            + (
                "one of " + ", ".join(repr(b.name) for b in writable) + "."
                if writable
                else "you have no backend of your own to write to (register one first)."
            ),
            "required",
        )
    return writable[0]


def _generators(joiner: str) -> str:
    """The kinds that have a generator, by name: "Flowise"."""
    return joiner.join(adapter_class(kind).label for kind in generating_kinds())


def generator_backend(tenant: Tenant | None, backend: str | None) -> Backend:
    """A backend with a generator to generate on: the named one, or the first shared one.

    The configured chat model (which may carry credentials) goes only to
    shared backends, the operator's own servers, never to a tenant's.
    """
    if backend is not None:
        chosen = find_backend(tenant, backend)
        if chosen.kind not in generating_kinds():
            makers = _generators(" and ")
            verb = "has" if len(generating_kinds()) == 1 else "have"
            raise adapter_class(chosen.kind).unsupported(
                chosen.name, f"generating flows (only {makers} {verb} a generator)"
            )
    else:
        first = (
            Backend.objects.filter(kind__in=generating_kinds(), enabled=True, tenant__isnull=True)
            .order_by("name")
            .first()
        )
        if first is None:
            raise ValidationError(
                f"No shared {_generators(' or ')} backend to generate on.",
                details={"operation": "generate"},
            )
        chosen = first
    if chosen.tenant_id is not None:
        raise ValidationError(
            f"Flows are generated on shared {_generators(' or ')} backends only: the "
            "generator's chat model is the operator's and is never sent to a tenant's server.",
            details={"backend": chosen.name, "operation": "generate"},
        )
    return chosen

"""Reads of backends, scoped by tenant."""

from __future__ import annotations

from django.db.models import Q, QuerySet

from backends.models import Backend
from flywheel.errors import NotFoundError
from flywheel.models import Tenant

# Ids are bigints: 18 decimal digits always fit, so longer ids are simply unknown.
MAX_ID_DIGITS = 18


def backends_visible_to(tenant: Tenant) -> QuerySet[Backend]:
    """Shared backends plus the tenant's own."""
    return (
        Backend.objects.filter(Q(tenant__isnull=True) | Q(tenant=tenant))
        .select_related("health")
        .order_by("name", "id")
    )


def as_id(value: int | str) -> int | None:
    """The database id ``value`` spells (ASCII digits, leading zeros allowed), or None."""
    text = str(value)
    # str.isdigit() is true for "²" and other digits int() refuses or reads differently.
    if not (text.isascii() and text.isdigit()) or len(text) > MAX_ID_DIGITS:
        return None
    return int(text)


def backend_get_for(tenant: Tenant, backend_id: int | str) -> Backend:
    """A backend the tenant may see. Raises NotFoundError otherwise (no existence leak)."""
    pk = as_id(backend_id)
    backend = None if pk is None else backends_visible_to(tenant).filter(pk=pk).first()
    if backend is None:
        raise NotFoundError(
            f"No backend with id {str(backend_id)[:40]}.", details={"id": str(backend_id)[:40]}
        )
    return backend


def backend_find(*, name: str, tenant: Tenant | None) -> Backend | None:
    """The backend called ``name`` (any case) that ``tenant`` owns, or the shared one
    of that name when ``tenant`` is None; never another owner's."""
    owned = Q(tenant__isnull=True) if tenant is None else Q(tenant=tenant)
    return Backend.objects.filter(owned, name__iexact=name).first()

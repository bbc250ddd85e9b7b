"""Reads of backends, scoped by tenant."""

from __future__ import annotations

from django.db.models import Q, QuerySet

from backends.models import Backend
from flywheel.errors import NotFoundError
from flywheel.models import Tenant


def backends_visible_to(tenant: Tenant) -> QuerySet[Backend]:
    """Shared backends plus the tenant's own."""
    return (
        Backend.objects.filter(Q(tenant__isnull=True) | Q(tenant=tenant))
        .select_related("health")
        .order_by("name")
    )


def backend_get_for(tenant: Tenant, backend_id: int | str) -> Backend:
    """A backend the tenant may see. Raises NotFoundError otherwise (no existence leak)."""
    backend = (
        backends_visible_to(tenant).filter(pk=backend_id).first()
        if str(backend_id).isdigit()
        else None
    )
    if backend is None:
        raise NotFoundError(f"No backend with id {backend_id}.", details={"id": str(backend_id)})
    return backend

"""Whose decisions a reader may see: one tenant's, or (staff) every tenant's.

An API key reads its own tenant. A logged-in person reads the tenant they act
for (flywheel.services.tenant_for_user); staff with the permission to view
routing decisions read every tenant, or one they pick with ``tenant=<slug>``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from flywheel.errors import PermissionDeniedError, ValidationError
from flywheel.models import ApiKey, Tenant
from flywheel.services import tenant_acted_for

READ_ALL_PERMISSION = "routing.view_routingdecision"


@dataclass(frozen=True)
class Scope:
    """What a reader sees: ``tenant``'s data, or every tenant's when it is None."""

    tenant: Tenant | None
    staff: bool = False  # may read every tenant, and pick one
    tenants: tuple[Tenant, ...] = field(default=())  # the choices of a staff reader

    @property
    def tenant_id(self) -> int | None:
        return self.tenant.pk if self.tenant is not None else None


def _picked(slug: str | None) -> Tenant | None:
    if not slug:
        return None
    tenant = Tenant.objects.filter(slug=slug[:50]).first()
    if tenant is None:
        raise ValidationError(
            "The tenant parameter is not valid.",
            details={"fields": {"tenant": "Must be the slug of a tenant."}},
        )
    return tenant


def scope_for_user(user: Any, *, tenant: str | None = None) -> Scope:
    """The scope of a logged-in person. Raises PermissionDeniedError when they act for
    no tenant (or ask for another tenant without being staff), ValidationError for an
    unknown ``tenant`` slug."""
    if user.is_staff and user.has_perm(READ_ALL_PERMISSION):
        return Scope(_picked(tenant), staff=True, tenants=tuple(Tenant.objects.order_by("name")))
    own = tenant_acted_for(user)
    if tenant and tenant != own.slug:
        raise PermissionDeniedError("You can read your own tenant's decisions only.")
    return Scope(own)


def scope_for_key(api_key: ApiKey, *, tenant: str | None = None) -> Scope:
    """An API key's scope: its own tenant. Raises PermissionDeniedError for another
    ``tenant``."""
    if tenant and tenant != api_key.tenant.slug:
        raise PermissionDeniedError("An API key reads its own tenant's decisions only.")
    return Scope(api_key.tenant)

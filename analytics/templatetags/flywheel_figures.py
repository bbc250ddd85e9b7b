"""Today's figures for the admin's index page."""

from __future__ import annotations

from typing import Any

from django import template
from django.db.models import Q
from django.utils import timezone

from analytics.access import READ_ALL_PERMISSION
from analytics.reads import totals
from backends.models import Backend
from backends.selectors import backends_visible_to
from flywheel.services import tenant_for_user

register = template.Library()


@register.simple_tag(takes_context=True)
def flywheel_today(context: dict[str, Any]) -> dict[str, Any] | None:
    """Questions since midnight (UTC), the share answered, and the enabled backends that
    are unhealthy or in cooldown (or never probed): every tenant's for staff who may read
    them all, else those of the tenant the person acts for; None for someone acting for
    none."""
    user = context["request"].user
    if user.has_perm(READ_ALL_PERMISSION):
        tenant, backends = None, Backend.objects.all()
    else:
        tenant = tenant_for_user(user)
        if tenant is None:
            return None
        backends = backends_visible_to(tenant)
    midnight = timezone.now().replace(hour=0, minute=0, second=0, microsecond=0)
    unhealthy = (
        backends.filter(enabled=True)
        .filter(
            Q(health__isnull=True)
            | Q(health__healthy=False)
            | Q(health__cooldown_until__gt=timezone.now())
        )
        .order_by("name")
    )
    return {
        **totals(tenant=tenant, since=midnight),
        "unhealthy": [b.name for b in unhealthy],
    }

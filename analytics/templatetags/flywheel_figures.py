"""Today's figures for the admin's index page."""

from __future__ import annotations

from typing import Any

from django import template
from django.db.models import Q
from django.utils import timezone

from analytics.metrics import totals
from backends.models import Backend

register = template.Library()


@register.simple_tag
def flywheel_today() -> dict[str, Any]:
    """Every tenant's questions since midnight (UTC), the share answered, and the enabled
    backends that are unhealthy or in cooldown (or never probed)."""
    midnight = timezone.now().replace(hour=0, minute=0, second=0, microsecond=0)
    unhealthy = (
        Backend.objects.filter(enabled=True)
        .filter(
            Q(health__isnull=True)
            | Q(health__healthy=False)
            | Q(health__cooldown_until__gt=timezone.now())
        )
        .order_by("name")
    )
    return {
        **totals(tenant=None, since=midnight),
        "unhealthy": [b.name for b in unhealthy],
    }

"""Drop the cached flows snapshot when an admin (or anyone) changes what it holds.

A backend's own fields (enabled, weight, name, ...) are part of it, so Backend
edits count as well as Flow edits; backends/signals.py drops the health.
"""

from __future__ import annotations

from typing import Any

from django.db.models import Q
from django.db.models.signals import post_delete, post_save
from django.dispatch import receiver

from backends.adapters import run_sync
from backends.errors import BackendError
from backends.models import Backend
from backends.services import backend_added
from chatflows import snapshot
from chatflows.models import Flow
from chatflows.services import adiscover


@receiver([post_save, post_delete], sender=Backend)
@receiver([post_save, post_delete], sender=Flow)
def _flows_state_changed(sender: type, **kwargs: Any) -> None:
    snapshot.invalidate()


# Of a new backend's flows, how many its report names (the person who added it reads them).
LISTED_FLOWS = 20


@receiver(backend_added)
def _discover_a_new_backend(sender: type, backend: Backend, healthy: bool, **kwargs: Any) -> dict:
    """A new backend's flows, discovered at once (backends.services.backend_onboard)."""
    if not healthy:
        return {"flows": {"discovered": False, "error": "the health check failed"}}
    try:
        report = run_sync(adiscover, backend)
    except BackendError as err:
        return {"flows": {"discovered": False, "error": err.message}}
    found = Flow.objects.filter(backend=backend, removed_at__isnull=True).order_by("name")
    routable = found.filter(Q(is_generic=True) | ~Q(intent_keywords=[]), deployed=True).count()
    return {
        "flows": {
            "discovered": True,
            "total": report.total,
            "added": report.added,
            "routable": routable,
            "listed": [
                {
                    "name": f.name,
                    "deployed": f.deployed,
                    "generic": f.is_generic,
                    "serves": f.intent_keywords[:5],
                }
                for f in found[:LISTED_FLOWS]
            ],
        }
    }

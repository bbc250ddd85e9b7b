"""Drop the cached routing snapshot when an admin (or anyone) changes what it holds."""

from __future__ import annotations

from typing import Any

from django.db.models.signals import post_delete, post_save
from django.dispatch import receiver

from backends import snapshot
from backends.models import Backend, BackendHealth
from chatflows.models import Flow


@receiver([post_save, post_delete], sender=Backend)
@receiver([post_save, post_delete], sender=BackendHealth)
@receiver([post_save, post_delete], sender=Flow)
def _routing_state_changed(sender: type, **kwargs: Any) -> None:
    snapshot.invalidate()

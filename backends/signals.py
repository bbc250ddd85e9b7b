"""Drop the cached health when an admin (or anyone) changes what it holds.

The flows snapshot is dropped by chatflows/signals.py, which also listens to
Backend: one layer down knows nothing of flows.
"""

from __future__ import annotations

from typing import Any

from django.db.models.signals import post_delete, post_save
from django.dispatch import receiver

from backends import snapshot
from backends.models import Backend, BackendHealth


@receiver([post_save, post_delete], sender=Backend)
@receiver([post_save, post_delete], sender=BackendHealth)
def _health_state_changed(sender: type, **kwargs: Any) -> None:
    snapshot.invalidate()

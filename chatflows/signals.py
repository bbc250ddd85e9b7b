"""Drop the cached flows snapshot when an admin (or anyone) changes what it holds.

A backend's own fields (enabled, weight, name, ...) are part of it, so Backend
edits count as well as Flow edits; backends/signals.py drops the health.
"""

from __future__ import annotations

from typing import Any

from django.db.models.signals import post_delete, post_save
from django.dispatch import receiver

from backends.models import Backend
from chatflows import snapshot
from chatflows.models import Flow


@receiver([post_save, post_delete], sender=Backend)
@receiver([post_save, post_delete], sender=Flow)
def _flows_state_changed(sender: type, **kwargs: Any) -> None:
    snapshot.invalidate()

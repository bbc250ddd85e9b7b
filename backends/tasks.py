"""Celery tasks: a thin door onto the health service (run by beat).

Discovery's task lives with discovery, in chatflows/tasks.py.
"""

from __future__ import annotations

from celery import shared_task

from backends.adapters import run_sync
from backends.errors import BackendError
from backends.services import ahealth_check_all


@shared_task(name="backends.check_health")
def check_health() -> dict[str, int]:
    """Probe every enabled backend; returns how many were healthy and unhealthy."""
    outcomes = run_sync(ahealth_check_all)
    healthy = sum(1 for o in outcomes if not isinstance(o, BackendError) and o.ok)
    return {"healthy": healthy, "unhealthy": len(outcomes) - healthy}

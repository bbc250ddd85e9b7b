"""Celery tasks: thin doors onto the health and discovery services (run by beat)."""

from __future__ import annotations

from celery import shared_task

from backends.adapters import run_sync
from backends.errors import BackendError
from backends.services import ahealth_check_all
from chatflows.services import adiscover_all


@shared_task(name="backends.check_health")
def check_health() -> dict[str, int]:
    """Probe every enabled backend; returns how many were healthy and unhealthy."""
    outcomes = run_sync(ahealth_check_all)
    healthy = sum(1 for o in outcomes if not isinstance(o, BackendError) and o.ok)
    return {"healthy": healthy, "unhealthy": len(outcomes) - healthy}


@shared_task(name="backends.discover_flows")
def discover_flows() -> dict[str, int]:
    """Refresh every enabled backend's flows; returns counts over all backends."""
    reports = run_sync(adiscover_all)
    totals = {"added": 0, "updated": 0, "removed": 0, "failed": 0}
    for report in reports:
        if isinstance(report, BackendError):
            totals["failed"] += 1
            continue
        totals["added"] += report.added
        totals["updated"] += report.updated
        totals["removed"] += report.removed
    return totals

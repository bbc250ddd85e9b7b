"""Celery tasks: a thin door onto the discovery service (run by beat)."""

from __future__ import annotations

from celery import shared_task

from backends.adapters import run_sync
from backends.errors import BackendError
from chatflows.services import adiscover_all


@shared_task(name="chatflows.discover_flows")
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

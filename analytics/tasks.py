"""Celery tasks of analytics: thin doors onto its services (run by beat)."""

from __future__ import annotations

from typing import Any

from celery import shared_task
from django.conf import settings

from analytics.retention import retention_apply, retention_pack
from analytics.rollups import rollups_refresh


@shared_task(name="analytics.rollup_decisions")
def rollup_decisions() -> dict[str, Any]:
    """Roll the decisions written since the last run up into minute and hour rows."""
    return rollups_refresh()


@shared_task(name="analytics.apply_retention")
def apply_retention() -> dict[str, Any]:
    """Make the coming days' partitions; drop what is past the retention."""
    done = retention_apply()
    return {**done, "kept_since": done["kept_since"].isoformat()}


# A run stops itself after FLYWHEEL_PACK_SECONDS (PostgreSQL cancels a rebuild then):
# its limits stand past that, not at the default tasks' minute.
@shared_task(
    name="analytics.pack_indexes",
    soft_time_limit=settings.PACK_SECONDS + 60,
    time_limit=settings.PACK_SECONDS + 120,
)
def pack_indexes() -> dict[str, Any]:
    """Pack the indexes of the days that have passed."""
    return retention_pack()

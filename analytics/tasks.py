"""Celery tasks of analytics: thin doors onto its services (run by beat)."""

from __future__ import annotations

from typing import Any

from celery import shared_task

from analytics.rollups import rollups_refresh


@shared_task(name="analytics.rollup_decisions")
def rollup_decisions() -> dict[str, Any]:
    """Roll the decisions written since the last run up into minute and hour rows."""
    return rollups_refresh()

"""Celery tasks of routing: thin doors onto its services (run by beat)."""

from __future__ import annotations

from celery import shared_task

from routing.recording import performance_publish_all
from routing.state import policy_values


@shared_task(name="routing.publish_performance")
def publish_performance() -> dict[str, int]:
    """Share every recent backend + intent performance aggregate again."""
    return {"published": performance_publish_all(window=policy_values().performance_window)}

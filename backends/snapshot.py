"""Backend health as the hot path reads it, published to the shared cache.

The health service writes it after each probe and routing reads it without
any HTTP call. The database stays the source of truth: a cold or evicted
cache is filled from it once, by the first reader. Edits to backends or their
health drop the cached copy (backends/signals.py). The routable flows have a
snapshot of their own, one layer up (chatflows/snapshot.py).
"""

from __future__ import annotations

from typing import Any

from backends.models import BackendHealth
from backends.policy import health_policy
from flywheel.cache import forget, shared_cache

HEALTH_KEY = "flywheel:snapshot:health"


def _health_snapshot() -> dict[int, dict[str, Any]]:
    return {
        h.backend_id: {
            "healthy": h.healthy,
            "latency_ms": h.latency_ms,
            "checked_at": h.last_checked_at.isoformat() if h.last_checked_at else None,
            "cooldown_until": h.cooldown_until.isoformat() if h.cooldown_until else None,
            "consecutive_failures": h.consecutive_failures,
            "needs_trial": h.needs_trial,
        }
        for h in BackendHealth.objects.all()
    }


def publish_health() -> dict[int, dict[str, Any]]:
    snapshot = _health_snapshot()
    shared_cache().set(HEALTH_KEY, snapshot, timeout=health_policy().health_cache_ttl_seconds)
    return snapshot


def read_health() -> dict[int, dict[str, Any]]:
    """Current health by backend id; from the cache, else from the database (once)."""
    snapshot = shared_cache().get(HEALTH_KEY)
    return publish_health() if snapshot is None else snapshot


def invalidate() -> None:
    """Drop the cached health: the next reader fills it from the database."""
    forget(HEALTH_KEY)

"""The routing state that background tasks publish and the hot path reads.

Health and the routable flows live in the shared cache (Redis in real
deployments), written by the health and discovery services after each run
and read by routing without any HTTP call. The database stays the source of
truth: a cold or evicted cache is filled from it once, by the first reader.
Admin edits to backends, flows or health drop the cached copy (see signals).
"""

from __future__ import annotations

from typing import Any

from backends.models import Backend, BackendHealth
from flywheel.cache import shared_cache

HEALTH_KEY = "flywheel:snapshot:health"
FLOWS_KEY = "flywheel:snapshot:flows"


def _policy_ttls() -> tuple[int, int]:
    from routing.services import routing_policy_get

    policy = routing_policy_get()
    return policy.health_cache_ttl_seconds, policy.flow_cache_ttl_seconds


def _health_snapshot() -> dict[int, dict[str, Any]]:
    return {
        h.backend_id: {
            "healthy": h.healthy,
            "latency_ms": h.latency_ms,
            "checked_at": h.last_checked_at.isoformat() if h.last_checked_at else None,
            "cooldown_until": h.cooldown_until.isoformat() if h.cooldown_until else None,
            "consecutive_failures": h.consecutive_failures,
        }
        for h in BackendHealth.objects.all()
    }


def _flows_snapshot() -> dict[str, Any]:
    from chatflows.models import Flow

    backends = {
        b.id: {
            "id": b.id,
            "name": b.name,
            "kind": b.kind,
            "weight": b.weight,
            "tenant": b.tenant_id,
            # Credentials stay out of the cache: a process loads them from the
            # database, again whenever this version changes.
            "version": b.updated_at.isoformat(),
        }
        for b in Backend.objects.filter(enabled=True)
    }
    flows = [
        {
            "id": f.id,
            "backend": f.backend_id,
            "external_id": f.external_id,
            "name": f.name,
            "flow_type": f.flow_type,
            "endpoint_name": f.endpoint_name,
            "intent_keywords": list(f.intent_keywords),
            "scope": f.scope,
            "is_generic": f.is_generic,
        }
        for f in Flow.objects.routable().order_by("backend_id", "id")
    ]
    return {"backends": backends, "flows": flows}


def publish_health() -> dict[int, dict[str, Any]]:
    snapshot = _health_snapshot()
    shared_cache().set(HEALTH_KEY, snapshot, timeout=_policy_ttls()[0])
    return snapshot


def publish_flows() -> dict[str, Any]:
    snapshot = _flows_snapshot()
    shared_cache().set(FLOWS_KEY, snapshot, timeout=_policy_ttls()[1])
    return snapshot


def read_health() -> dict[int, dict[str, Any]]:
    """Current health by backend id; from the cache, else from the database (once)."""
    snapshot = shared_cache().get(HEALTH_KEY)
    return publish_health() if snapshot is None else snapshot


def read_flows() -> dict[str, Any]:
    """Enabled backends and their routable flows; from the cache, else from the database."""
    snapshot = shared_cache().get(FLOWS_KEY)
    return publish_flows() if snapshot is None else snapshot


def invalidate() -> None:
    shared_cache().delete_many([HEALTH_KEY, FLOWS_KEY])

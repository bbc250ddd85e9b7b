"""The routable flows as the hot path reads them, published to the shared cache.

Enabled backends and their routable flows, written by discovery (and the
flow lifecycle services) after each change and read by routing without any
HTTP call. The database stays the source of truth: a cold or evicted cache is
filled from it once, by the first reader. Edits to backends or flows drop the
cached copy (chatflows/signals.py). Health has its own snapshot, one layer
down (backends/snapshot.py).
"""

from __future__ import annotations

from typing import Any

from backends.models import Backend
from backends.policy import health_policy
from chatflows.models import Flow
from flywheel.cache import forget, shared_cache

FLOWS_KEY = "flywheel:snapshot:flows"


def _flows_snapshot() -> dict[str, Any]:
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
            "tunable": f.tunable,
        }
        for f in Flow.objects.routable().order_by("backend_id", "id")
    ]
    return {"backends": backends, "flows": flows}


def publish_flows() -> dict[str, Any]:
    snapshot = _flows_snapshot()
    shared_cache().set(FLOWS_KEY, snapshot, timeout=health_policy().flow_cache_ttl_seconds)
    return snapshot


def read_flows() -> dict[str, Any]:
    """Enabled backends and their routable flows; from the cache, else from the database."""
    snapshot = shared_cache().get(FLOWS_KEY)
    return publish_flows() if snapshot is None else snapshot


def invalidate() -> None:
    """Drop the cached flows: the next reader fills them from the database."""
    forget(FLOWS_KEY)

"""bench/learning_http.py's set-up, run inside Flywheel: ``manage.py shell -c`` with a plan.

The plan (JSON, on stdin) says which backends to register and, on a fresh
database, the routing policy's numbers to set:

    {"fresh": true, "policy": {"half_life_seconds": 40.0, ...}, "timeout": 30.0,
     "limit": "10000000/minute",
     "backends": {"R1": {"url": "http://127.0.0.1:40001",
                         "flows": {"R1-general": "general", ...}}}}

Fresh: this run's cache keys are deleted (the prefix's only: the Redis is
shared), the defaults installed (tenant, intents, policy) and the policy's
numbers set as the admin sets them. Every backend is registered for the default
tenant, as ``add_backend --tenant`` does (backends.services.backend_create, then
backend_onboard: a probe and the discovery of its flows), and each discovered
flow is set to serve exactly its one intent, as ``set_flow --intents`` does
(chatflows.services.flow_routing_set): every backend's flow for an intent is
matched alike. The backends belong to the bench key's tenant, so their breakers
count that tenant's failures as the simulator's do (a shared backend opens only
on failures from two tenants). Fresh, the last line printed is the bench key.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from typing import Any

from django.core.cache import cache

from backends.services import backend_create, backend_onboard
from chatflows.models import Flow
from chatflows.services import flow_routing_set
from flywheel.models import Tenant
from flywheel.services import api_key_create, tenant_get_or_create_default
from routing.install import defaults_load
from routing.selection.state import routing_policy_get


def forget_cache() -> None:
    """Delete this prefix's keys (evidence, breakers, snapshots of an earlier run)."""
    client = cache._cache.get_client(write=True)  # type: ignore[attr-defined]
    keys = list(client.scan_iter(match=cache.make_key("*"), count=1000))
    if keys:
        client.delete(*keys)


def policy_set(values: Mapping[str, float]) -> None:
    policy = routing_policy_get()
    for name, value in values.items():
        setattr(policy, name, value)
    policy.full_clean()
    policy.save()


def register(tenant: Tenant, name: str, url: str, flows: Mapping[str, str], timeout: float) -> None:
    """Register the backend, discover its flows and set each one's intent."""
    backend = backend_create(
        name=name,
        kind="flowise",
        base_url=url,
        tenant=tenant,
        trusted=True,
        timeout_seconds=timeout,
    )
    report = backend_onboard(backend=backend)
    found = {f.external_id: f for f in Flow.objects.filter(backend=backend, removed_at=None)}
    missing = sorted(set(flows) - set(found))
    if missing:
        raise RuntimeError(f"{name}: flows not discovered: {missing}; onboarding: {report}")
    for external_id, intent in flows.items():
        flow_routing_set(flow=found[external_id], is_generic=False, intent_keywords=[intent])


def main() -> None:
    plan: dict[str, Any] = json.loads(sys.stdin.read())
    if plan["fresh"]:
        forget_cache()
        defaults_load()
        policy_set(plan["policy"])
    tenant = tenant_get_or_create_default()
    for name, backend in plan["backends"].items():
        register(tenant, name, backend["url"], backend["flows"], plan["timeout"])
    if plan["fresh"]:
        print(api_key_create(tenant=tenant, name="bench", rate_limit=plan["limit"])[1])


if __name__ == "__main__":
    main()

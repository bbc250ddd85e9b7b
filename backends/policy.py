"""The numbers health keeping needs (cooldown, cache lifetimes), from whoever owns them.

They are edited with the routing policy, but routing builds on backends, not
the other way round: routing registers a source in its AppConfig.ready()
(``use_health_policy``) and backends only ever calls ``health_policy()``.
Until a source is registered (a script that sets up Django without routing)
the defaults below apply; they equal RoutingPolicy's field defaults.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class HealthPolicy:
    cooldown_failures: int = 3
    cooldown_seconds: int = 60
    health_cache_ttl_seconds: int = 90
    flow_cache_ttl_seconds: int = 120


_source: Callable[[], HealthPolicy] = HealthPolicy


def use_health_policy(source: Callable[[], HealthPolicy]) -> None:
    """Read the policy from ``source`` from now on (called once, at start-up)."""
    global _source
    _source = source


def health_policy() -> HealthPolicy:
    """The current policy, as the registered source reads it (on every call)."""
    return _source()

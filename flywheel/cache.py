"""The shared cache, as one long-lived client per process.

``django.core.cache.cache`` hands each request context its own cache object;
under ASGI every request is a new context, so with Redis every request would
open a new connection. Routing state, sessions and keys are read on every
query, so those modules share this one client (redis-py's connection pool is
thread-safe) instead.
"""

from __future__ import annotations

from functools import cache as once
from typing import Any

from django.core.cache import caches
from django.core.signals import setting_changed
from django.dispatch import receiver


@once
def shared_cache() -> Any:
    return caches.create_connection("default")


@receiver(setting_changed)
def _caches_changed(setting: str, **kwargs: Any) -> None:
    if setting == "CACHES":  # tests that swap the cache get a fresh client
        shared_cache.cache_clear()

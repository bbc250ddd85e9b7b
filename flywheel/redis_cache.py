"""Django's Redis cache, with one long-lived redis-py client per process.

Django's RedisCacheClient builds a new ``redis.Redis`` object for every
cache call; with redis-py 8 that construction costs more than the command
itself. A ``redis.Redis`` client is thread-safe (each command borrows a
connection from its pool), so one for writes and one for reads is enough.
With several servers configured, each process keeps reading from the
replica it picked first, instead of picking one per call.
"""

from __future__ import annotations

from typing import Any

from django.core.cache.backends import redis as django_redis
from redis import Redis


class _LongLivedClients(django_redis.RedisCacheClient):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._clients: dict[bool, Redis] = {}

    def get_client(self, key: Any = None, *, write: bool = False) -> Redis:
        client = self._clients.get(write)
        if client is None:
            client = self._clients[write] = super().get_client(key, write=write)
        return client


class RedisCache(django_redis.RedisCache):
    """Drop-in for ``django.core.cache.backends.redis.RedisCache``."""

    def __init__(self, server: Any, params: dict[str, Any]) -> None:
        super().__init__(server, params)
        self._class = _LongLivedClients

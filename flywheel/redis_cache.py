"""Django's Redis cache, with one long-lived redis-py client per process.

Django's RedisCacheClient builds a new ``redis.Redis`` object for every
cache call; with redis-py 8 that construction costs more than the command
itself. A ``redis.Redis`` client is thread-safe (each command borrows a
connection from its pool), so one for writes and one for reads is enough.
With several servers configured, each process keeps reading from the
replica it picked first, instead of picking one per call.

:meth:`RedisCache.set_many_async` writes from an event loop without a thread:
a redis.asyncio client per loop, on the same server, with the same timeouts,
keys and serialisation as the synchronous client, so either reads what the
other wrote. The query path stores each session's turns this way before its
answer goes out (flywheel.cache.shared_cache_set); handing them to a thread
instead cost a routed question about a tenth of its CPU.
"""

from __future__ import annotations

import asyncio
import weakref
from typing import Any

from django.core.cache.backends import redis as django_redis
from django.core.cache.backends.base import DEFAULT_TIMEOUT
from redis import Redis
from redis import asyncio as aioredis

# Options of the synchronous pool that are classes of its own, not connection settings.
_SYNC_ONLY_OPTIONS = {"parser_class", "pool_class", "connection_class"}


class _LongLivedClients(django_redis.RedisCacheClient):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._clients: dict[bool, Redis] = {}
        self._loop_clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, aioredis.Redis]
        self._loop_clients = weakref.WeakKeyDictionary()

    def loop_client(self) -> aioredis.Redis:
        """The running loop's client of the server writes go to (an asyncio client
        belongs to one loop)."""
        loop = asyncio.get_running_loop()
        client = self._loop_clients.get(loop)
        if client is None:
            django_client: Any = self  # its settings are private to Django's class
            options = {
                k: v for k, v in django_client._pool_options.items() if k not in _SYNC_ONLY_OPTIONS
            }
            server = django_client._servers[django_client._get_connection_pool_index(True)]
            pool = aioredis.ConnectionPool.from_url(server, **options)
            client = self._loop_clients[loop] = aioredis.Redis(connection_pool=pool)
        return client

    async def set_many_async(self, data: dict[str, Any], timeout: float | None) -> None:
        """set_many's effect (a key each, with the timeout) in one pipeline, on the loop."""
        serializer: Any = getattr(self, "_serializer")  # noqa: B009 - Django's, private
        seconds = None if timeout is None else int(timeout)
        pipeline = self.loop_client().pipeline(transaction=False)
        for key, value in data.items():
            if timeout == 0:
                pipeline.delete(key)
            else:
                pipeline.set(key, serializer.dumps(value), ex=seconds)
        await pipeline.execute()

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

    async def set_many_async(self, data: dict[str, Any], timeout: Any = DEFAULT_TIMEOUT) -> None:
        """``set_many`` from an event loop, without blocking it or a thread."""
        keys = {self.make_and_validate_key(key): value for key, value in data.items()}
        clients: _LongLivedClients = getattr(self, "_cache")  # noqa: B009 - Django's, private
        await clients.set_many_async(keys, self.get_backend_timeout(timeout))

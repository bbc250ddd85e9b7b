"""The shared cache, as one long-lived client per process.

``django.core.cache.cache`` hands each request context its own cache object;
under ASGI every request is a new context, so with Redis every request would
open a new connection. Routing state, sessions and keys are read on every
query, so those modules share this one client (redis-py's connection pool is
thread-safe) instead.
"""

from __future__ import annotations

import asyncio
import weakref
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


class _Group:
    """Writes that leave together, and the future their writers wait on."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.values: dict[int | None, dict[str, Any]] = {}  # by timeout
        self.sent: asyncio.Future[None] = loop.create_future()


class _GroupSetter:
    """Cache writes of one event loop, sent together off the loop (see shared_cache_set).

    While one group is on its way to the cache, the writes that arrive queue
    up and leave together as the next group: one round trip, on a worker
    thread, however many coroutines are writing.
    """

    def __init__(self) -> None:
        # No reference to the loop: _setters is keyed by it, weakly.
        self._next: _Group | None = None
        self._flushing: asyncio.Task[None] | None = None

    @property
    def idle(self) -> bool:
        return self._next is None and self._flushing is None

    async def set(self, key: str, value: Any, timeout: int | None) -> None:
        loop = asyncio.get_running_loop()
        if self._next is None:
            self._next = _Group(loop)
        group = self._next
        group.values.setdefault(timeout, {})[key] = value
        if self._flushing is None:
            self._flushing = loop.create_task(self._flush())
        await asyncio.shield(group.sent)  # a cancelled caller leaves the group to be written

    async def _flush(self) -> None:
        try:
            while self._next is not None:
                group, self._next = self._next, None
                try:
                    await asyncio.get_running_loop().run_in_executor(
                        None, _set_groups, group.values
                    )
                except Exception as err:
                    group.sent.set_exception(err)
                    group.sent.exception()  # retrieved: the waiters may all have gone
                else:
                    group.sent.set_result(None)
        finally:
            self._flushing = None


def _set_groups(groups: dict[int | None, dict[str, Any]]) -> None:
    cache = shared_cache()
    for timeout, values in groups.items():
        cache.set_many(values, timeout)


_setters: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _GroupSetter]
_setters = weakref.WeakKeyDictionary()


async def shared_cache_set(
    key: str, value: Any, timeout: int | None, *, alone: bool = False
) -> None:
    """Set ``key`` in the shared cache without holding up the event loop.

    Returns once the value is stored. Concurrent writes from the same loop
    share one round trip (a pipeline, on a worker thread), so a burst of
    queries costs a few round trips rather than one blocking call each.
    A caller that knows it is ``alone`` (nothing else in flight on its loop)
    writes at once, on the loop: measured here, a lone SET takes 0.10 ms
    that way against 0.26 ms through the thread. Raises what the cache raised.
    """
    loop = asyncio.get_running_loop()
    setter = _setters.get(loop)
    if setter is None:
        setter = _setters[loop] = _GroupSetter()
    if alone and setter.idle:
        shared_cache().set(key, value, timeout)
        return
    await setter.set(key, value, timeout)

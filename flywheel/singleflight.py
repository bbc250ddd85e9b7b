"""One load for many waiters: concurrent callers asking for the same thing share one call.

When a process-local memo is cold or expires (the routing state, a backend's
credentials), every query in flight at that moment would otherwise start
the same database read; with hundreds in flight that is hundreds of reads
queued on a handful of threads. With :class:`SingleFlight` the first caller
starts the load and the others await its result.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Hashable
from typing import Generic, TypeVar

T = TypeVar("T")


class SingleFlight(Generic[T]):
    """Share one in-flight call per key (and per event loop: a future belongs to one loop)."""

    def __init__(self) -> None:
        self._calls: dict[tuple[asyncio.AbstractEventLoop, Hashable], asyncio.Future[T]] = {}

    async def do(self, key: Hashable, load: Callable[[], Awaitable[T]]) -> T:
        """The result of ``load()``; callers that arrive while it runs get the same result
        (or the same exception)."""
        slot = (asyncio.get_running_loop(), key)
        call = self._calls.get(slot)
        if call is None:
            call = asyncio.ensure_future(load())
            self._calls[slot] = call
            call.add_done_callback(lambda _: self._calls.pop(slot, None))
        # shield: one waiter giving up must not cancel the load for the others
        return await asyncio.shield(call)

"""The adapter registry: ``Backend.kind`` -> adapter class, and one pooled client per backend.

Adding a backend kind means writing one module and adding one line to ADAPTERS
(and the migration ``makemigrations`` then writes: the database's check on
``Backend.kind`` lists the registered kinds). Everything else that knows the
kinds (the model's choices, the API, the admin, the planner, the lifecycle)
reads them here, and asks the adapter class what its kind can do.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Awaitable, Callable
from typing import ParamSpec, TypeVar

from asgiref.sync import async_to_sync

from backends.adapters.base import BackendConfig, FlowBackend
from backends.adapters.flowise import FlowiseBackend
from backends.adapters.langflow import LangflowBackend
from backends.http import Transport

ADAPTERS: dict[str, type[FlowBackend]] = {
    "flowise": FlowiseBackend,
    "langflow": LangflowBackend,
}


def kinds() -> tuple[str, ...]:
    """Every backend kind with an adapter, in registry order."""
    return tuple(ADAPTERS)


def kind_choices() -> list[tuple[str, str]]:
    """``(kind, label)`` for choice fields: the model's, and through it the admin's and API's."""
    return [(kind, adapter.label) for kind, adapter in ADAPTERS.items()]


def adapter_class(kind: str) -> type[FlowBackend]:
    """The adapter class of ``kind``, to ask what its kind can do; ValueError if none."""
    try:
        return ADAPTERS[kind]
    except KeyError as err:
        raise ValueError(f"No adapter for backend kind {kind!r}.") from err


def generating_kinds() -> tuple[str, ...]:
    """The kinds whose servers can generate a flow from a description."""
    return tuple(kind for kind, adapter in ADAPTERS.items() if adapter.generates)


# An aiohttp session belongs to the event loop it first ran on, so the pool
# is kept per loop: one client per backend inside a server's loop, and a fresh
# set for each asyncio.run() of a command or task (dropped with its loop).
_pools: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[tuple[object, ...], FlowBackend]]
_pools = weakref.WeakKeyDictionary()
_closing: set[asyncio.Task[None]] = set()  # keeps close tasks alive until they finish


def build_adapter(config: BackendConfig, transport: Transport | None = None) -> FlowBackend:
    """A new adapter with its own client (tests pass a transport)."""
    return adapter_class(config.kind).build(config, transport)


def get_adapter(config: BackendConfig) -> FlowBackend:
    """The pooled adapter for ``config`` in the running event loop.

    A changed configuration (URL, key, timeout) gets a new client; the old
    one is closed in the background.
    """
    loop = asyncio.get_running_loop()
    pool = _pools.setdefault(loop, {})
    adapter = pool.get(config.cache_key)
    if adapter is None:
        for key in [k for k in pool if k[0] == config.id]:
            task = loop.create_task(pool.pop(key).aclose())
            _closing.add(task)
            task.add_done_callback(_closing.discard)
        adapter = pool[config.cache_key] = build_adapter(config)
    return adapter


async def close_adapters() -> None:
    """Close every pooled client of the running loop (at shutdown, in tests)."""
    pool = _pools.pop(asyncio.get_running_loop(), {})
    for adapter in pool.values():
        await adapter.aclose()


P = ParamSpec("P")
R = TypeVar("R")


def run_sync(fn: Callable[P, Awaitable[R]], *args: P.args, **kwargs: P.kwargs) -> R:
    """Call an async backend operation from sync code (commands, tasks, admin, DRF views).

    Where the call gets an event loop of its own (a command, a Celery task),
    the clients it opened are closed before that loop ends; inside a server
    whose loop already keeps clients, they stay pooled.
    """

    async def call() -> R:
        owns_loop = asyncio.get_running_loop() not in _pools
        try:
            return await fn(*args, **kwargs)
        finally:
            if owns_loop:
                await close_adapters()

    return async_to_sync(call)()

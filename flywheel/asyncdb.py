"""Calling the (synchronous) ORM from the async query path.

``sync_to_async`` defaults to thread_sensitive=True, which under Django's
ASGI handler runs a request's database work on a thread of its own for that
request: hundreds of requests in flight mean hundreds of threads, each
waiting for a database connection. The query path's calls are independent
of any thread-bound state, so they share the event loop's bounded executor,
and each call hands its connection back (to the pool) when it is done. While the
database is down, a call that needs a connection fails at once rather than
waiting for the pool (flywheel.outage).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Coroutine
from typing import Any, ParamSpec, TypeVar

from asgiref.sync import sync_to_async
from django.db import connections

P = ParamSpec("P")
R = TypeVar("R")


def db(func: Callable[P, R]) -> Callable[P, Coroutine[Any, Any, R]]:
    """``func`` as a coroutine function running on the shared executor."""

    @functools.wraps(func)
    def call(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return func(*args, **kwargs)
        finally:
            connections.close_all()

    return sync_to_async(call, thread_sensitive=False)

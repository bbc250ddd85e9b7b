"""Read your writes: a read right after an answer finds what this process wrote.

Decisions are written behind the answers (routing.recording.writer); a reader of
decisions, sessions or turns waits for this process's pending writes first, and the
query path waits for its own session's only.
"""

from __future__ import annotations

import asyncio
import functools
import time
import uuid
from collections.abc import Callable
from typing import ParamSpec, TypeVar

from routing.recording.writer import drain, hurry, pending

P = ParamSpec("P")
R = TypeVar("R")


async def session_settled(session_id: uuid.UUID, timeout: float = 2.0) -> None:
    """Wait until this process has written everything of ``session_id`` so far, or
    ``timeout`` has passed (the database is down: then reading it fails anyway)."""
    if pending(session_id):
        hurry(session_id)
    deadline = time.monotonic() + timeout
    while pending(session_id) and time.monotonic() < deadline:
        await asyncio.sleep(0.002)


def _settle(timeout: float = 2.0) -> None:
    """Let this process's pending writes land (up to ``timeout``), so that a read
    right after an answer (its decision, its session) finds what it wrote."""
    if pending():
        drain(timeout)


def reads_own_writes(read: Callable[P, R]) -> Callable[P, R]:
    """Read your writes: ``read`` (a reader of decisions, sessions or turns) runs once
    this process's pending writes have landed, so a read right after an
    answer finds it. Every such reader is wrapped by this one helper; the query path
    itself waits for one session's writes only (session_settled)."""

    @functools.wraps(read)
    def after_own_writes(*args: P.args, **kwargs: P.kwargs) -> R:
        _settle()
        return read(*args, **kwargs)

    return after_own_writes

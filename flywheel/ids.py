"""Random ids (UUID versions 4 and 7) without a system call each.

``uuid.uuid4()`` asks the kernel for 16 random bytes every time, and
``os.urandom`` lets go of the interpreter lock while it does: on the query
path (two ids a question) each call was a point where a writer thread took
the lock and the event loop waited for it back. Here the kernel's bytes are
fetched 4 KiB at a time and handed out 16 at a time; the ids are as random
(the same source), and a forked child starts on bytes of its own.
"""

from __future__ import annotations

import os
import threading
import time
import uuid
from datetime import UTC, datetime

_BATCH = 4096  # bytes: 256 ids a system call


class _Ids:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pool = b""
        self._at = 0

    def next(self) -> uuid.UUID:
        return uuid.UUID(bytes=self.random(), version=4)

    def random(self) -> bytes:
        """16 random bytes."""
        with self._lock:
            if self._at >= len(self._pool):
                self._pool, self._at = os.urandom(_BATCH), 0
            raw = self._pool[self._at : self._at + 16]
            self._at += 16
        return raw

    def forget(self) -> None:
        self._lock = threading.Lock()  # a fork may have copied it held
        self._pool, self._at = b"", 0


_ids = _Ids()
os.register_at_fork(after_in_child=_ids.forget)


def uuid4() -> uuid.UUID:
    """A random UUID, as ``uuid.uuid4()`` makes."""
    return _ids.next()


def uuid7(at: float | None = None) -> uuid.UUID:
    """A UUID of version 7 (RFC 9562): the time in milliseconds since the epoch in its
    first 48 bits (``at``, in seconds, or now), then random bits.

    A decision's request id is one: ids made later sort after, so its index grows at
    its right edge (random ids scatter inserts over every page), and an id says when
    its question came (:func:`uuid7_time`) even after its row is gone."""
    millis = int((time.time() if at is None else at) * 1000)
    value = int.from_bytes(millis.to_bytes(6, "big") + _ids.random()[6:], "big")
    # The version (7) and variant (RFC) bits, set by hand: uuid.UUID(version=7) needs 3.14.
    value = (value & ~(0xF << 76) | 7 << 76) & ~(0xC000 << 48) | 0x8000 << 48
    return uuid.UUID(int=value)


def uuid7_time(value: uuid.UUID) -> datetime | None:
    """When a version-7 UUID was made (to the millisecond, UTC); None for other versions."""
    if value.version != 7:
        return None
    return datetime.fromtimestamp(int.from_bytes(value.bytes[:6], "big") / 1000, UTC)

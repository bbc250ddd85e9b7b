"""Random ids (UUID version 4) without a system call each.

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
import uuid

_BATCH = 4096  # bytes: 256 ids a system call


class _Ids:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pool = b""
        self._at = 0

    def next(self) -> uuid.UUID:
        with self._lock:
            if self._at >= len(self._pool):
                self._pool, self._at = os.urandom(_BATCH), 0
            raw = self._pool[self._at : self._at + 16]
            self._at += 16
        return uuid.UUID(bytes=raw, version=4)

    def forget(self) -> None:
        self._lock = threading.Lock()  # a fork may have copied it held
        self._pool, self._at = b"", 0


_ids = _Ids()
os.register_at_fork(after_in_child=_ids.forget)


def uuid4() -> uuid.UUID:
    """A random UUID, as ``uuid.uuid4()`` makes."""
    return _ids.next()

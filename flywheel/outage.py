"""While the database is down, the request path learns it once, not once per request.

Each call that needs the database would otherwise wait for the pool to give up
(DATABASE_POOL_TIMEOUT) on a thread of the shared executor: a few such calls
hold every thread, and requests that need no database queue behind them. Once a
connection attempt finds the database unreachable, the next ones
(flywheel/postgres: every connection, a pool checkout included) fail at once
with Django's OperationalError (so whatever degrades on an outage degrades as
before, and the rest answer 503), except one every PROBE_SECONDS, which tries
the database; the first that succeeds ends the outage.
"""

from __future__ import annotations

import logging
import threading
import time

from django.db import OperationalError

logger = logging.getLogger(__name__)

PROBE_SECONDS = 0.5


class DatabaseOutage:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.down_since: float | None = None  # monotonic time it was found down (None: up)
        self._next_probe = 0.0
        self._probing = False

    def admit(self) -> None:
        """Let a call try the database, or raise OperationalError at once: it is down and
        another call is trying it, or one did less than PROBE_SECONDS ago."""
        if self.down_since is None:  # the usual case, without the lock
            return
        with self._lock:
            if self.down_since is None:
                return
            now = time.monotonic()
            if not self._probing and now >= self._next_probe:
                self._probing = True  # this call finds out
                return
            down_for = now - self.down_since
        raise OperationalError(
            f"the database has been unreachable for {down_for:.1f} s; it is tried again "
            f"every {PROBE_SECONDS:g} s"
        )

    def answered(self) -> None:
        """A call reached the database."""
        if self.down_since is None and not self._probing:
            return
        with self._lock:
            was_down, self.down_since, self._probing = self.down_since, None, False
        if was_down is not None:
            logger.warning("The database answers again after %.1f s.", time.monotonic() - was_down)

    def inconclusive(self) -> None:
        """A call admitted as the probe ended in an error that says nothing of the
        database's reach: the next call may probe, so no probe stays claimed for ever."""
        with self._lock:
            self._probing = False

    def failed(self, err: BaseException) -> None:
        """A call found the database unreachable."""
        with self._lock:
            now = time.monotonic()
            first = self.down_since is None
            if first:
                self.down_since = now
            self._probing = False
            self._next_probe = now + PROBE_SECONDS
        if first:
            logger.warning(
                "The database is unreachable (%s: %s): requests that need it are answered "
                "503 at once until it answers again.",
                type(err).__name__,
                err,
            )


database_outage = DatabaseOutage()

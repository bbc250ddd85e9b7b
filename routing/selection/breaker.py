"""The traffic breaker: failing answers put a backend in cooldown, not only failing probes.

Each process keeps the outcome of the last WINDOW measured attempts on each
backend. Once MIN_ATTEMPTS are there and at least FAILURE_SHARE of them
failed, the breaker opens: the backend goes into cooldown for the policy's
``cooldown_seconds`` (backends.services.health_trip), which every process
reads from the published health within a second. When the cooldown has
passed the breaker is half-open: the one query that claims the trial (a key
set only if absent in the shared cache, and once per process) tries the
backend, the others still pass it by. The trial's answer closes the breaker;
its failure opens it for another cooldown.

The window is per process (no round trip per attempt); a backend failing
everywhere trips in every process, and the first to open it wins.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime

from django.db import connections

from backends.services import health_trial_passed, health_trip
from flywheel.cache import CACHE_FAILURES, shared_cache
from routing.selection import state as routing_state
from routing.selection.attempt import Attempt
from routing.selection.scoring import HealthEntry, awaiting_trial

logger = logging.getLogger(__name__)

WINDOW = 10
MIN_ATTEMPTS = 5
FAILURE_SHARE = 0.5
TRIAL_KEY = "flywheel:breaker:trial:{backend}"
TRIAL_SECONDS = 60  # a trial whose query never reports back frees the slot after this

_windows: dict[int, deque[bool]] = {}
_trials: dict[int, float] = {}  # backend id -> monotonic time this process claimed its trial
_lock = threading.Lock()
_applier = ThreadPoolExecutor(max_workers=1, thread_name_prefix="breaker")


@dataclass(frozen=True)
class Change:
    backend_id: int
    backend: str
    opened: bool  # False: closed (its trial answered)
    reason: str = ""


def trial_claim(backend_id: int) -> bool:
    """Whether this query is the one to try a backend whose breaker is half-open."""
    now = time.monotonic()
    with _lock:
        claimed = _trials.get(backend_id)
        if claimed is not None and now - claimed < TRIAL_SECONDS:
            return False
        _trials[backend_id] = now
    try:
        won = bool(shared_cache().inner.add(TRIAL_KEY.format(backend=backend_id), 1, TRIAL_SECONDS))
    except CACHE_FAILURES:  # the cache is down: one trial per process, then
        won = True
    if not won:
        with _lock:
            _trials.pop(backend_id, None)
    return won


def _release(backend_id: int) -> None:
    with _lock:
        _trials.pop(backend_id, None)
    shared_cache().delete(TRIAL_KEY.format(backend=backend_id))


def breaker_note(
    attempts: Sequence[Attempt], health: Mapping[int, HealthEntry], now: datetime
) -> list[Change]:
    """Count a query's attempts; the breakers they open or close (to be applied with
    :func:`breaker_apply`, off the event loop)."""
    changes: list[Change] = []
    for attempt in attempts:
        if not attempt.measured:
            continue
        if attempt.backend_id in _trials and awaiting_trial(health.get(attempt.backend_id), now):
            changes.append(
                Change(
                    attempt.backend_id,
                    attempt.backend,
                    opened=not attempt.ok,
                    reason=("" if attempt.ok else f"its trial failed: {attempt.error_type}"),
                )
            )
            continue
        window = _windows.setdefault(attempt.backend_id, deque(maxlen=WINDOW))
        window.append(attempt.ok)
        failed = window.count(False)
        if len(window) >= MIN_ATTEMPTS and failed >= FAILURE_SHARE * len(window):
            reason = f"{failed} of its last {len(window)} answers failed ({attempt.error_type})"
            window.clear()
            changes.append(Change(attempt.backend_id, attempt.backend, opened=True, reason=reason))
    return changes


def breaker_apply(changes: Sequence[Change]) -> None:
    """Open or close the breakers (database, published health); sync, in a thread."""
    for change in changes:
        if change.opened:
            if health_trip(backend_id=change.backend_id, reason=change.reason):
                logger.warning("Backend %s is in cooldown: %s.", change.backend, change.reason)
        elif health_trial_passed(backend_id=change.backend_id):
            logger.warning("Backend %s answered its trial: back in rotation.", change.backend)
        _release(change.backend_id)
        _windows.pop(change.backend_id, None)
    if changes:
        routing_state.forget()  # this process routes on the new health at once


def breaker_apply_later(changes: Sequence[Change]) -> None:
    """Apply ``changes`` on the breakers' own thread: the query does not wait, and the
    change outlives whatever event loop the query ran on."""
    if changes:
        _applier.submit(_apply_logged, list(changes))


def _apply_logged(changes: list[Change]) -> None:
    try:
        breaker_apply(changes)
    except Exception as err:  # the next failures (or a probe) will try again
        logger.warning("A breaker could not be changed (%s: %s)", type(err).__name__, err)
    finally:
        connections.close_all()  # this thread's connection goes back to the pool


def breaker_settle(timeout: float = 10.0) -> None:
    """Wait until the breaker changes asked for so far are applied (tests)."""
    _applier.submit(lambda: None).result(timeout)


def breaker_forget() -> None:
    """Drop this process's windows and trial claims (tests)."""
    with _lock:
        _windows.clear()
        _trials.clear()

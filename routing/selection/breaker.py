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

Fair health: only the backend's own failures count. An attempt the backend
refused for what the query sent it (Attempt.caller_fault: a 413 for a history
over its body limit, a 400) is not counted at all, and a trial it ends decides
nothing: the trial is freed for the next query. A shared backend (no owning
tenant) opens only when its failures come from more than one tenant, or from
one while its probe (Celery beat's health check, in the published health)
fails too: so one tenant cannot open it for the others. A tenant's own backend
opens on its owner's failures.

The window is per process (no round trip per attempt); a backend failing
everywhere trips in every process, and the first to open it wins.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime

from django.db import connections

from backends.services import health_trial_passed, health_trip
from flywheel.cache import CACHE_FAILURES, shared_cache
from routing.selection import state as routing_state
from routing.selection.attempt import Attempt
from routing.selection.scoring import awaiting_trial
from routing.selection.state import RoutingState

logger = logging.getLogger(__name__)

WINDOW = 10
MIN_ATTEMPTS = 5
FAILURE_SHARE = 0.5
TRIAL_KEY = "flywheel:breaker:trial:{backend}"
TRIAL_SECONDS = 60  # a trial whose query never reports back frees the slot after this

# Per backend: (answered, the tenant whose query it was) for its last WINDOW attempts.
_windows: dict[int, deque[tuple[bool, int | None]]] = {}
_trials: dict[int, float] = {}  # backend id -> monotonic time this process claimed its trial
_lock = threading.Lock()
_applier = ThreadPoolExecutor(max_workers=1, thread_name_prefix="breaker")


@dataclass(frozen=True)
class Change:
    backend_id: int
    backend: str
    opened: bool | None  # False: closed (its trial answered); None: its trial decided nothing
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
    attempts: Sequence[Attempt], state: RoutingState, now: datetime, *, tenant_id: int | None
) -> list[Change]:
    """Count the attempts of a query of ``tenant_id``; the breakers they open or close
    (to be applied with :func:`breaker_apply`, off the event loop)."""
    changes: list[Change] = []
    for attempt in attempts:
        backend_id = attempt.backend_id
        trial = backend_id in _trials and awaiting_trial(state.health.get(backend_id), now)
        if attempt.caller_fault:  # the backend answered: it refused what it was sent
            if trial:
                changes.append(Change(backend_id, attempt.backend, opened=None))
            continue
        if not attempt.measured:  # cut short by the query's budget: it says nothing
            continue
        if trial:
            reason = "" if attempt.ok else f"its trial failed: {attempt.error_type}"
            changes.append(Change(backend_id, attempt.backend, not attempt.ok, reason))
            continue
        window = _windows.setdefault(backend_id, deque(maxlen=WINDOW))
        window.append((attempt.ok, tenant_id))
        if attempt.ok:  # an answer opens nothing: the failures need no counting
            continue
        failed = sum(1 for ok, _ in window if not ok)
        if (
            len(window) >= MIN_ATTEMPTS
            and failed >= FAILURE_SHARE * len(window)
            and _its_own(window, backend_id, state)
        ):
            reason = f"{failed} of its last {len(window)} answers failed ({attempt.error_type})"
            window.clear()
            changes.append(Change(backend_id, attempt.backend, opened=True, reason=reason))
    return changes


def _its_own(
    window: Sequence[tuple[bool, int | None]], backend_id: int, state: RoutingState
) -> bool:
    """Whether the window's failures are the backend's own doing: always for a tenant's
    own backend; for a shared one, when they come from two tenants or more, or its
    probe fails too."""
    if not any(b.id == backend_id and b.tenant_id is None for b in state.backends):
        return True
    health = state.health.get(backend_id)
    if health is not None and health.probe_failed:
        return True
    return len({tenant for ok, tenant in window if not ok}) > 1


def breaker_apply(changes: Sequence[Change]) -> None:
    """Open or close the breakers (database, published health); sync, in a thread."""
    for change in changes:
        if change.opened is None:  # free for the next query to take
            _release(change.backend_id)
            continue
        if change.opened:
            if health_trip(backend_id=change.backend_id, reason=change.reason):
                logger.warning("Backend %s is in cooldown: %s.", change.backend, change.reason)
        elif health_trial_passed(backend_id=change.backend_id):
            logger.warning("Backend %s answered its trial: back in rotation.", change.backend)
        _release(change.backend_id)
        _windows.pop(change.backend_id, None)
    if any(change.opened is not None for change in changes):
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

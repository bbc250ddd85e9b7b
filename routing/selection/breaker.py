"""The traffic breaker: failing answers take a flow or a backend out of rotation for a while.

It opens at the scope the failures belong to:

- a flow for one intent (backend, flow, intent): once MIN_ATTEMPTS of its last
  WINDOW measured attempts are there and at least FAILURE_SHARE failed. The
  backend's other flows, and this flow for other intents, keep their traffic.
  Open flow scopes live in the shared cache (SCOPES_KEY), read with the routing
  state within a second.
- the backend: only on failures of the backend itself, in its last WINDOW
  attempts whatever the flow: at least FAILURE_SHARE failed, and either most of
  them could not reach it (refused or reset connections), or they span two
  flow scopes or more and none of them answered in the window (a backend that
  still answers one flow is up: its failing flows open one by one). Then it
  goes into cooldown (backends.services.health_trip), as a failing probe puts it.

A backend stays out for the policy's ``cooldown_seconds``; a flow scope for
FIRST_SCOPE_COOLDOWN seconds, doubled each time its trial fails, up to the
same ``cooldown_seconds`` (a flow that failed for a while is often back soon, and
the estimates keep it from first place until it answers well again). Then the
breaker is half-open: the one query that claims the scope's trial (a key set only if
absent in the shared cache, and once per process) tries it, the others pass
it by. The trial's answer closes the breaker; its failure opens it again.

Fair health: only the backend's own failures count. An attempt the backend
refused for what the query sent it (Attempt.caller_fault) is not counted, and
a trial it ends decides nothing: the trial is freed for the next query. A
shared backend (no owning tenant) opens, at either scope, only when its
failures come from more than one tenant, or from one while its probe (Celery
beat's health check) fails too: so one tenant cannot open it for the others.

The windows are per process (no round trip per attempt); a scope failing
everywhere trips in every process, and the first to open it wins.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from django.db import connections

from backends.errors import BackendConnectionError
from backends.policy import health_policy
from backends.services import health_trial_passed, health_trip
from flywheel.cache import CACHE_FAILURES, shared_cache
from routing.selection import state as routing_state
from routing.selection.attempt import Attempt
from routing.selection.scoring import Scope, awaiting_trial
from routing.selection.state import SCOPES_KEY, RoutingState

logger = logging.getLogger(__name__)

WINDOW = 10
MIN_ATTEMPTS = 5
FAILURE_SHARE = 0.5
TRIAL_KEY = "flywheel:breaker:trial:{scope}"
TRIAL_SECONDS = 60  # a trial whose query never reports back frees the slot after this
FIRST_SCOPE_COOLDOWN = 10.0
SCOPES_TTL_SECONDS = 24 * 3600
SCOPES_LOCK_KEY = "flywheel:breaker:scopes:lock"
SCOPES_LOCK_SECONDS = 5  # a holder that died frees the key after this
SCOPES_LOCK_WAIT = 10.0  # the breakers' own thread waits, never a query
# Refused, reset: nobody answered (a timeout may be one slow flow, and counts by scope).
UNREACHABLE = frozenset({BackendConnectionError.type})


@dataclass(frozen=True)
class Seen:
    """One measured attempt in a window."""

    ok: bool
    tenant_id: int | None
    flow: Scope
    unreachable: bool = False


@dataclass(frozen=True)
class Change:
    scope: Scope
    name: str  # "backend" or "backend / flow for intent", for the log
    opened: bool | None  # False: closed (its trial answered); None: its trial decided nothing
    reason: str = ""
    again: bool = False  # opened again: its trial failed


def scope_cooldown(opens: int, cooldown_seconds: float) -> float:
    """How long a flow scope stays out the ``opens``-th time in a row it opens."""
    return min(FIRST_SCOPE_COOLDOWN * 2 ** (max(opens, 1) - 1), cooldown_seconds)


def scope_key(scope: Scope) -> str:
    return ":".join(str(part) for part in scope)


def _failures_ours(window: Sequence[Seen], shared: bool, probe_failed: bool) -> bool:
    """Whether the window's failures are the backend's own doing: always for a tenant's
    own backend; for a shared one, when they come from two tenants or more, or its
    probe fails too."""
    if not shared or probe_failed:
        return True
    return len({seen.tenant_id for seen in window if not seen.ok}) > 1


def _tripped(window: Sequence[Seen]) -> int:
    """How many failed, if enough did to open the breaker; else 0."""
    failed = sum(1 for seen in window if not seen.ok)
    if len(window) >= MIN_ATTEMPTS and failed >= FAILURE_SHARE * len(window):
        return failed
    return 0


def backend_wide(window: Sequence[Seen]) -> bool:
    """Whether the window's failures are the backend's rather than one flow's."""
    failed = [seen for seen in window if not seen.ok]
    if sum(seen.unreachable for seen in failed) >= FAILURE_SHARE * len(failed):
        return True
    flows: dict[Scope, list[bool]] = {}
    for seen in window:
        flows.setdefault(seen.flow, []).append(seen.ok)
    return len(flows) > 1 and not any(any(oks) for oks in flows.values())


class Windows:
    """The last WINDOW measured attempts of each flow scope and each backend: what opens
    a breaker, and at which scope. Pure (the simulator in bench/learning.py drives one)."""

    def __init__(self) -> None:
        self.flows: dict[Scope, deque[Seen]] = {}
        self.backends: dict[int, deque[Seen]] = {}

    def note(
        self,
        attempt: Attempt,
        intent: str,
        *,
        tenant_id: int | None,
        shared: bool,
        probe_failed: bool,
        on_trial: Callable[[Scope], bool],
    ) -> Change | None:
        """Count one attempt; the breaker it opens or closes, if any. ``on_trial``: whether
        a scope's attempt was its half-open trial."""
        flow: Scope = (attempt.backend_id, attempt.flow_id, intent)
        backend: Scope = (attempt.backend_id,)
        name = f"{attempt.backend} / {attempt.flow} for {intent}"
        for scope, label in ((backend, attempt.backend), (flow, name)):
            if on_trial(scope):
                if attempt.caller_fault:  # the backend answered: it refused what it was sent
                    return Change(scope, label, opened=None)
                if not attempt.measured:
                    return None
                reason = "" if attempt.ok else f"its trial failed: {attempt.error_type}"
                self.flows.pop(flow, None)
                self.backends.pop(attempt.backend_id, None)
                return Change(scope, label, not attempt.ok, reason, again=not attempt.ok)
        if not attempt.measured:  # cut short by the budget, or the caller's fault
            return None
        if attempt.retried and not attempt.ok:  # failing still, as routing knew: no news
            return None
        seen = Seen(attempt.ok, tenant_id, flow, attempt.error_type in UNREACHABLE)
        own = self.backends.setdefault(attempt.backend_id, deque(maxlen=WINDOW))
        scoped = self.flows.setdefault(flow, deque(maxlen=WINDOW))
        own.append(seen)
        scoped.append(seen)
        if attempt.ok:  # an answer opens nothing
            return None
        failed = _tripped(own)
        if failed and backend_wide(own) and _failures_ours(own, shared, probe_failed):
            reason = f"{failed} of its last {len(own)} answers failed ({attempt.error_type})"
            own.clear()
            return Change(backend, attempt.backend, opened=True, reason=reason)
        failed = _tripped(scoped)
        if failed and _failures_ours(scoped, shared, probe_failed):
            reason = (
                f"{failed} of its last {len(scoped)} {intent} answers failed ({attempt.error_type})"
            )
            scoped.clear()
            return Change(flow, name, opened=True, reason=reason)
        return None


_windows = Windows()
_trials: dict[Scope, float] = {}  # scope -> monotonic time this process claimed its trial
_lock = threading.Lock()
_applier = ThreadPoolExecutor(max_workers=1, thread_name_prefix="breaker")


def trial_claim(scope: Scope) -> bool:
    """Whether this query is the one to try a scope whose breaker is half-open."""
    now = time.monotonic()
    with _lock:
        claimed = _trials.get(scope)
        if claimed is not None and now - claimed < TRIAL_SECONDS:
            return False
        _trials[scope] = now
    key = TRIAL_KEY.format(scope=scope_key(scope))
    try:
        won = bool(shared_cache().inner.add(key, 1, TRIAL_SECONDS))
    except CACHE_FAILURES:  # the cache is down: one trial per process, then
        won = True
    if not won:
        with _lock:
            _trials.pop(scope, None)
    return won


def _release(scope: Scope) -> None:
    with _lock:
        _trials.pop(scope, None)
    shared_cache().delete(TRIAL_KEY.format(scope=scope_key(scope)))


def breaker_note(
    attempts: Sequence[Attempt],
    state: RoutingState,
    now: datetime,
    *,
    tenant_id: int | None,
    intent: str,
) -> list[Change]:
    """Count the attempts of a query of ``tenant_id`` for ``intent``; the breakers they
    open or close (to be applied with :func:`breaker_apply`, off the event loop)."""
    shared = {b.id for b in state.backends if b.tenant_id is None}

    def on_trial(scope: Scope) -> bool:
        entry = state.health.get(scope[0]) if len(scope) == 1 else state.scopes.get(scope)
        return scope in _trials and awaiting_trial(entry, now)

    changes: list[Change] = []
    for attempt in attempts:
        health = state.health.get(attempt.backend_id)
        change = _windows.note(
            attempt,
            intent,
            tenant_id=tenant_id,
            shared=attempt.backend_id in shared,
            probe_failed=health is not None and health.probe_failed,
            on_trial=on_trial,
        )
        if change is not None:
            changes.append(change)
    return changes


@contextmanager
def _scopes_held() -> Iterator[None]:
    """Hold the open scopes' key for one read-modify-write: two processes opening two
    scopes at once would otherwise each write back the key without the other's. Waits
    at most SCOPES_LOCK_WAIT seconds, then goes on (a cache that is down or stuck must
    not stop the breakers)."""
    cache = shared_cache()
    token = uuid.uuid4().hex
    deadline = time.monotonic() + SCOPES_LOCK_WAIT

    def take() -> bool:
        return cache.add(SCOPES_LOCK_KEY, token, SCOPES_LOCK_SECONDS)

    held = take()
    while not held and not cache.failing and time.monotonic() < deadline:
        time.sleep(0.01)  # another holder: a miss here is a lost race, not a failure
        held = take()
    if not held:
        logger.warning("The open flow scopes were written without their lock (busy or down).")
    try:
        yield
    finally:
        if held and cache.get(SCOPES_LOCK_KEY) == token:
            cache.delete(SCOPES_LOCK_KEY)


def _scope_set(change: Change) -> None:
    """Open or close a flow scope in the shared cache."""
    cooldown = health_policy().cooldown_seconds  # read before the lock: it may query
    with _scopes_held():
        _scope_write(change, cooldown)


def _scope_write(change: Change, cooldown_seconds: float) -> None:
    published = dict(shared_cache().get(SCOPES_KEY) or {})
    key = scope_key(change.scope)
    if not change.opened:
        published.pop(key, None)
    else:
        opens = published.get(key, {}).get("opens", 0) + 1 if change.again else 1
        seconds = scope_cooldown(opens, cooldown_seconds)
        until = datetime.now(UTC) + timedelta(seconds=seconds)
        published[key] = {"until": until.timestamp(), "reason": change.reason, "opens": opens}
    shared_cache().set(SCOPES_KEY, published, SCOPES_TTL_SECONDS)


def breaker_apply(changes: Sequence[Change]) -> None:
    """Open or close the breakers (database, published health, shared cache); sync, in a
    thread."""
    for change in changes:
        if change.opened is None:  # free for the next query to take
            _release(change.scope)
            continue
        if len(change.scope) > 1:
            _scope_set(change)
            verb = "out of rotation" if change.opened else "back in rotation"
            logger.warning(
                "%s is %s: %s.", change.name, verb, change.reason or "its trial answered"
            )
        elif change.opened:
            if health_trip(backend_id=change.scope[0], reason=change.reason):
                logger.warning("Backend %s is in cooldown: %s.", change.name, change.reason)
        elif health_trial_passed(backend_id=change.scope[0]):
            logger.warning("Backend %s answered its trial: back in rotation.", change.name)
        _release(change.scope)
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
        _windows.flows.clear()
        _windows.backends.clear()
        _trials.clear()

"""This process's book of evidence: what every process learned, plus its own newest attempts.

Evidence per backend x flow x intent comes from two places:

- published: folded from the stored performance records by whichever process
  wrote them (routing.recording.performance) and shared through the cache,
  keyed per backend and intent; read through the routing state's memo;
- local: this process's own attempts that the published evidence does not hold
  yet (newer than its newest attempt), so a process reacts to its own answers
  at once, before its writer has stored them.

It also knows the attempts in flight, so a backend that starts to hang is seen
as slow before its timeouts end (estimates.estimate). The simulator
(bench/learning.py) drives the same book in virtual time, with nothing published.
"""

from __future__ import annotations

import itertools
import math
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace

from routing.selection.estimates import (
    LN2,
    STALE_KEEP,
    Evidence,
    Prior,
    estimate,
    observation,
    prior_from,
)
from routing.selection.estimates import Estimate as Estimate
from routing.selection.memory import Sums

Key = tuple[int, int, str]  # (backend id, flow id, intent)
# The published evidence of some backends, for every intent: (backend id, intent) -> by flow id.
Published = Mapping[tuple[int, str], Mapping[int, Evidence]]
LOCAL_LIMIT = 500  # own attempts kept per key until published (a stalled writer)
POOL_CAP = 5.0  # attempts a pool (the backend's other intents, the fleet) may weigh in a prior
RETRY_SECONDS = 30.0
RETRY_STREAK = 2  # failures in a row, the newest attempts: a flow failing, whatever came before
SAME_MOMENT = 0.001  # seconds: a stored time and this process's float of it may differ so


@dataclass
class _Seen:
    """One of this process's attempts, until the published evidence holds it."""

    evidence: Evidence
    stored: float = 0.0  # when this process's writer stored its record (0: not yet)


@dataclass
class _Local:
    attempts: list[_Seen] = field(default_factory=list)
    base: Evidence | None = None  # the published evidence ``total`` was folded on
    moved_at: float = 0.0  # and the backend's last change elsewhere it was folded with
    total: Evidence | None = None  # base, then the attempts, one by one (None: not yet)


class Book:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._local: dict[Key, _Local] = {}
        self._in_flight: dict[Key, dict[int, float]] = {}
        self._tokens = itertools.count()

    def observe(
        self,
        key: Key,
        at: float,
        ok: bool,
        seconds: float,
        tokens: int | None,
        *,
        half_life: float,
        attempts_half_life: float,
    ) -> None:
        """One of this process's attempts, finished at ``at``."""
        seen = observation(at, ok, seconds, tokens)
        with self._lock:
            local = self._local.setdefault(key, _Local())
            local.attempts.append(_Seen(seen))
            if len(local.attempts) > LOCAL_LIMIT:  # a stalled writer: the oldest go
                del local.attempts[0]
            if local.total is not None:
                local.total = local.total.then(seen, half_life, attempts_half_life, local.moved_at)

    def stored(self, attempts: Iterable[tuple[Key, float]], at: float) -> None:
        """This process's writer stored the records of ``attempts`` (key, end time) by
        ``at``: the first evidence published after ``at`` holds them."""
        with self._lock:
            for key, ended in attempts:
                local = self._local.get(key)
                for seen in local.attempts if local else ():
                    if not seen.stored and abs(seen.evidence.newest - ended) <= SAME_MOMENT:
                        seen.stored = at
                        break

    def started(self, key: Key, at: float) -> int:
        """An attempt begins; the token ends it (:meth:`finished`)."""
        token = next(self._tokens)
        with self._lock:
            self._in_flight.setdefault(key, {})[token] = at
        return token

    def finished(self, key: Key, token: int) -> None:
        with self._lock:
            running = self._in_flight.get(key)
            if running is not None:
                running.pop(token, None)
                if not running:
                    del self._in_flight[key]

    def running(self, key: Key, now: float) -> list[float]:
        """How long each of the key's attempts in flight has run."""
        running = self._in_flight.get(key)
        return [now - at for at in running.values()] if running else []

    def evidence(
        self,
        key: Key,
        published: Evidence | None,
        now: float,
        half_life: float,
        attempts_half_life: float,
        moved_at: float = 0.0,
    ) -> Evidence:
        """The key's evidence at ``now``: the published one, then this process's attempts
        it does not hold yet, one by one (so a change shows in them as it would once
        stored; ``moved_at``: as Evidence.then). An attempt is held once its record was
        stored before the published evidence was folded (``published.at``): with several
        processes, another's newer attempts may be published before this one's."""
        local = self._local.get(key)
        if local is None:
            return (published or Evidence(at=now)).discounted(now, half_life)
        with self._lock:
            stale = local.base is not published or local.moved_at != moved_at
            if local.total is None or stale:
                folded_at = published.at if published else 0.0
                local.attempts = [a for a in local.attempts if not 0 < a.stored < folded_at]
                if not local.attempts:
                    del self._local[key]
                    return (published or Evidence(at=now)).discounted(now, half_life)
                total = published or Evidence()
                for seen in local.attempts:
                    total = total.then(seen.evidence, half_life, attempts_half_life, moved_at)
                local.base, local.moved_at, local.total = published, moved_at, total
            return local.total.discounted(now, half_life)

    def forget(self) -> None:
        with self._lock:
            self._local.clear()
            self._in_flight.clear()


book = Book()


@dataclass
class Beliefs:
    """What is known at ``now`` of the flows of some backends: each one's evidence (the
    published, then this process's own attempts) and the priors, drawn from the published
    evidence of the backends' other intents and of the fleet (pooled once per intent)."""

    published: Published
    now: float
    half_life: float
    attempts_half_life: float
    default: Prior
    book: Book
    _pools: dict[str, tuple[dict[int, tuple[Sums, Sums, float]], Sums]] = field(
        default_factory=dict
    )

    def of(self, backend_id: int, flow_id: int, intent: str) -> Estimate:
        key = (backend_id, flow_id, intent)
        published = self.published.get((backend_id, intent), {}).get(flow_id)
        prior, changed_at = self.prior(backend_id, intent)
        evidence = self.book.evidence(
            key, published, self.now, self.half_life, self.attempts_half_life, changed_at
        )
        # Its backend changed on another intent since it was last tried: what it showed
        # before counts little, and one query tries it first, to measure it again.
        moved = changed_at > evidence.newest and evidence.weight > 0
        if moved:
            evidence = evidence.stale(STALE_KEEP)
        running = self.book.running(key, self.now)
        found = estimate(evidence, prior, running)
        if not running and (moved or _retry_due(evidence, self.now)):  # not while tried
            return replace(found, retry_due=True)
        return found

    def prior(self, backend_id: int, intent: str) -> tuple[Prior, float]:
        """The prior from the backend's other intents and the fleet's other backends on
        this intent; and when the backend last changed on another intent (0: never)."""
        by_backend, everyone = self._pooled(intent)
        other_intents, this_intent, changed_at = by_backend.get(backend_id, (_NONE, _NONE, 0.0))
        fleet = everyone.minus(this_intent)
        pools = ((other_intents, POOL_CAP), (fleet, POOL_CAP))
        return prior_from(pools, self.default), changed_at

    def _pooled(self, intent: str) -> tuple[dict[int, tuple[Sums, Sums, float]], Sums]:
        """Per backend, the published sums of its other intents and of this one, and its
        last change on another; and the sums of every backend on this intent."""
        found = self._pools.get(intent)
        if found is not None:
            return found
        by_backend: dict[int, tuple[Sums, Sums, float]] = {}
        everyone = _NONE
        for (backend_id, flows_intent), flows in self.published.items():
            other, same, changed_at = by_backend.get(backend_id, (_NONE, _NONE, 0.0))
            for e in flows.values():
                f = math.exp(-LN2 * max(self.now - e.at, 0.0) / self.half_life)
                seen = e.long.times(f)
                if flows_intent == intent:
                    same = same.plus(seen)
                    everyone = everyone.plus(seen)
                else:
                    other = other.plus(seen)
                    changed_at = max(changed_at, e.changed_at)
            by_backend[backend_id] = (other, same, changed_at)
        self._pools[intent] = (by_backend, everyone)
        return by_backend, everyone


_NONE = Sums()


def _retry_due(evidence: Evidence, now: float) -> bool:
    """Whether a flow that was failing when last tried was last tried RETRY_SECONDS ago
    or more: then one query tries it first, as a breaker's trial would. Against a rival
    that always answers at once, routing would otherwise wait for its failures to fade
    entirely before one draw dared it (and a shared backend's breaker does not open for
    one tenant). Failing: most of its last attempts failed, or most of what counts
    since the last change it showed, or its newest attempts failed RETRY_STREAK times
    in a row or more (a backend that answered and then failed the few questions it had
    in flight: its short memory still holds answers, and too few may have come before
    for it to call the failures a change)."""
    failing = evidence.recent.failed > evidence.recent.answered
    failing = failing or evidence.streak >= RETRY_STREAK
    if not failing and evidence.changes:
        failing = evidence.long.failed > evidence.long.answered
    return failing and now - evidence.newest >= RETRY_SECONDS


def beliefs(
    published: Published,
    *,
    now: float,
    half_life: float,
    attempts_half_life: float,
    default: Prior,
    on: Book | None = None,
) -> Beliefs:
    """What ``on`` (this process's book, by default the process's) and ``published`` hold
    at ``now``."""
    return Beliefs(published, now, half_life, attempts_half_life, default, on or book)

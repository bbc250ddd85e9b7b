"""Evidence folded from the stored attempts, and shared with every process.

What routing learned is a function of the performance records: after a
restart, or in a process that never saw an attempt, the same evidence is
folded from them (routing.selection.estimates). Each backend + intent counts
its last ``window`` attempts within LIFETIME_HALF_LIVES half-lives (older ones
weigh under 1 %); each attempt is weighted by its age and by the newer attempts
of its flow, as routing.selection.estimates says.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable
from datetime import datetime, timedelta

from django.db import connection, connections
from django.utils import timezone

from routing.models import Intent, PerformanceRecord
from routing.recording.batch_sql import recent_attempts
from routing.selection.estimates import Attempted, folded
from routing.selection.state import (
    EVIDENCE_TTL_SECONDS,
    BackendEvidence,
    policy_values,
    publish_evidence,
)

LIFETIME_HALF_LIVES = 7
PUBLISH_INTERVAL = 0.25  # seconds: a process folds and shares evidence at most this often
INTENTS_SECONDS = 5.0

logger = logging.getLogger(__name__)

_Recent = tuple[int, str, int | None, bool, float, datetime, int | None]


def evidence_of(backend_ids: Iterable[int], window: int) -> dict[int, BackendEvidence]:
    """Every enabled intent's evidence on each backend, by flow: one statement on
    PostgreSQL (routing.recording.batch_sql.recent_attempts), one read per pair elsewhere."""
    policy = policy_values()
    half_life, attempts_half_life = policy.half_life_seconds, policy.half_life_attempts
    moment = timezone.now()
    since = moment - timedelta(seconds=half_life * LIFETIME_HALF_LIVES)
    intents = _enabled_intents()
    pairs = [(b, i) for b in sorted(set(backend_ids)) for i in intents]
    rows: list[_Recent]
    if connection.vendor == "postgresql":
        rows = recent_attempts(pairs, since, window)
    else:
        rows = [
            row
            for b, i in pairs
            for row in PerformanceRecord.objects.filter(
                backend_id=b, intent=i, created_at__gte=since
            )
            .order_by("-created_at")
            .values_list(
                "backend_id", "intent", "flow_id", "success", "latency_ms", "created_at",
                "total_tokens",
            )[:window]
        ]  # fmt: skip
    attempts: dict[tuple[int, str, int], list[Attempted]] = {}
    for backend_id, intent, flow_id, ok, latency_ms, at, tokens in sorted(rows, key=_when):
        if flow_id is None:  # its flow was deleted: nothing to route to
            continue
        seen = (at.timestamp(), ok, latency_ms / 1000, tokens)
        attempts.setdefault((backend_id, intent, flow_id), []).append(seen)
    now = moment.timestamp()
    half_lives = half_life, attempts_half_life
    folds = {key: folded(each, now, *half_lives) for key, each in attempts.items()}
    # A backend's change on one intent makes what its other intents showed before it
    # stale (Evidence.then): fold those again from the change on.
    changes: dict[int, dict[str, float]] = {}
    for (backend_id, intent, _), e in folds.items():
        by_intent = changes.setdefault(backend_id, {})
        by_intent[intent] = max(by_intent.get(intent, 0.0), e.changed_at)
    found: dict[int, BackendEvidence] = {b: {} for b, _ in pairs}
    for (backend_id, intent, flow_id), e in folds.items():
        each = attempts[backend_id, intent, flow_id]
        others = changes[backend_id]
        moved_at = max((at for i, at in others.items() if i != intent), default=0.0)
        if moved_at and e.newest >= moved_at > each[0][0]:
            e = folded(each, now, *half_lives, moved_at)
        found[backend_id].setdefault(intent, {})[flow_id] = e
    return found


_intents: tuple[float, list[str]] = (-INTENTS_SECONDS, [])


def _enabled_intents() -> list[str]:
    """The enabled intents, read at most every INTENTS_SECONDS (a fold runs up to four
    times a second)."""
    global _intents
    read_at, slugs = _intents
    if time.monotonic() - read_at >= INTENTS_SECONDS:
        slugs = list(Intent.objects.filter(enabled=True).values_list("slug", flat=True))
        _intents = (time.monotonic(), slugs)
    return slugs


def _when(row: _Recent) -> datetime:
    return row[5]


def evidence_publish(backend_ids: Iterable[int], window: int) -> None:
    publish_evidence(evidence_of(backend_ids, window))


class _Throttle:
    """Folding a backend's evidence reads its last ``window`` records per intent: at a
    thousand questions a second, once per batch would cost the writer more than the
    batch. So a process folds at most once per PUBLISH_INTERVAL: at once when the last
    fold is older, else on a timer at the end of the interval, for every backend tried
    meanwhile (every process still sees it within a second; this one counts its own
    attempts at once, routing.selection.learning)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._last = 0.0
        self._pending: set[int] = set()
        self._timer: threading.Timer | None = None

    def publish(self, backend_ids: Iterable[int], window: int) -> None:
        """Fold and share now, or at the end of the interval (raises only when now)."""
        with self._lock:
            self._pending.update(backend_ids)
            wait = self._last + PUBLISH_INTERVAL - time.monotonic()
            if wait > 0:
                if self._timer is None:
                    self._timer = threading.Timer(wait, self._later, args=(window,))
                    self._timer.daemon = True
                    self._timer.start()
                return
            chosen, self._pending = self._pending, set()
            self._last = time.monotonic()
        evidence_publish(chosen, window)

    def _later(self, window: int) -> None:
        with self._lock:
            chosen, self._pending, self._timer = self._pending, set(), None
            self._last = time.monotonic()
        try:
            if chosen:
                evidence_publish(chosen, window)
        except Exception as err:  # the records are stored: the next batch or beat shares
            logger.warning("Evidence not shared (%s: %s)", type(err).__name__, err)
        finally:
            connections.close_all()  # this thread's connection goes back to the pool

    def forget(self) -> None:
        """Drop what waits and the interval (tests)."""
        with self._lock:
            if self._timer is not None:
                self._timer.cancel()
            self._last, self._pending, self._timer = 0.0, set(), None
        global _intents
        _intents = (-INTENTS_SECONDS, [])


_throttle = _Throttle()
evidence_publish_soon = _throttle.publish
evidence_forget = _throttle.forget


def evidence_publish_all(*, window: int) -> int:
    """Publish again the evidence of every backend attempted within the evidence's
    lifetime (beat runs this), so that a cache that lost it (a Redis restart, an
    expiry) does not leave routing blind to history. Returns how many backends."""
    since = timezone.now() - timedelta(seconds=EVIDENCE_TTL_SECONDS)
    backends = set(
        PerformanceRecord.objects.filter(created_at__gte=since)
        .values_list("backend_id", flat=True)
        .order_by()  # the model's ordering (created_at) would make every record distinct
        .distinct()
    )
    publish_evidence(evidence_of(backends, window))
    return len(backends)

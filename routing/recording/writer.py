"""Writing down what a query did: one decision, its attempts, the session turn.

Everything for one query is written in one transaction, so a failure half-way
leaves no half-written rows; then the performance aggregates of the touched
backend + intent pairs are refreshed for routing in every process.

The write happens behind the answer (:func:`record_later`): the caller gets
its answer without waiting for the database, and the write completes even if
the caller has gone (and before the process exits). Writes of one session are
applied in order, and a session's next question waits for its earlier writes
in this process; its recent turns are in the shared cache for every other.
"""

from __future__ import annotations

import asyncio
import atexit
import collections
import logging
import sys
import threading
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings
from django.db import connection, connections

from flywheel.errors import DATABASE_RETRY_SECONDS, UnavailableError
from flywheel.metrics import SPOOL_REFUSED, WRITER_BACKLOG
from routing.recording.answers import CachedAnswer, answers_remember
from routing.recording.decision import DecisionData
from routing.recording.spool import Segment, Spool, spool_directory, spool_outage
from routing.recording.store import DATABASE_DOWN, database_down, decisions_record
from routing.recording.tally import count
from routing.selection.state import (
    policy_values,
)

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class _Job:
    data: DecisionData
    performance_window: int
    answer: CachedAnswer | None
    segment: Segment | None  # None: the spool could not be written (logged)


class _Lane:
    """One writer thread's jobs. Adding one wakes the thread only if it waits for a
    first job, or to end a gathering that has reached a batch."""

    def __init__(self) -> None:
        self._jobs: collections.deque[_Job] = collections.deque()
        self._arrived = threading.Event()  # set: jobs may wait; the thread does not sleep
        self._hurried = threading.Event()  # set: write what has gathered, now

    def add(self, job: _Job, batch: int) -> None:
        self._jobs.append(job)
        if not self._arrived.is_set():  # an attribute read: no lock while the thread works
            self._arrived.set()
        if len(self._jobs) >= batch:
            self._hurried.set()

    def hurry(self) -> None:
        self._hurried.set()
        self._arrived.set()

    def gather(self, seconds: float, batch: int) -> list[_Job]:
        """Wait for a first job, then ``seconds`` more (unless hurried); up to ``batch``
        of the jobs waiting. Cleared before the jobs are taken, so none goes unseen."""
        self._arrived.wait()
        self._hurried.wait(seconds)
        self._hurried.clear()
        self._arrived.clear()
        taken = [self._jobs.popleft() for _ in range(min(batch, len(self._jobs)))]
        if self._jobs:
            self.hurry()  # more than a batch waited: the next one goes at once
        return taken


class _Writer:
    """Writes decisions behind the answers, on threads of their own.

    Threads, not event-loop tasks: a write must survive whatever loop the
    query ran on (a command's loop ends with the command). A session always
    goes to the same thread, so its writes land in order. One thread
    (THREADS) is enough since writes are batched, and its batches are twice
    those of two: each batch costs a round trip or five in this process and
    in PostgreSQL whatever its size, and with two threads per worker that
    was a tenth of a routed question's CPU (bench/load.py, one run).

    Writes are grouped: a thread gathers what arrives within GATHER_SECONDS
    of its first job (up to BATCH jobs) and writes it in one transaction. A
    job only wakes its thread when the thread waits for a first one: a wake-up
    per job (a queue's) cost a web process 8 % of its CPU under load.
    One decision alone costs several milliseconds of ORM work in this
    process; twenty together cost little more. Whoever must see the rows
    now (a conversation reading its turns back, tests, exit) calls
    :meth:`hurry`, which ends the gathering at once.

    Every decision is in the spool (routing.recording.spool) before it is queued here.
    While the database is unreachable a thread retries its batch (waiting up
    to RETRY_MAX_SECONDS between tries) and the decisions stay spooled; if the
    process ends first, the next one replays them. A decision the database
    refuses as data is set aside, not retried.
    """

    THREADS = 1
    BATCH = 200
    GATHER_SECONDS = 0.1
    RETRY_FIRST_SECONDS = 0.2
    RETRY_MAX_SECONDS = 5.0
    REPLAY_SECONDS = 30.0

    def __init__(self) -> None:
        self._lanes: list[_Lane] = []
        self._lock = threading.Lock()
        self._pending: dict[uuid.UUID | None, int] = {}
        self._started = False
        self._spool: Spool | None = None
        self._outage = threading.Event()  # set while a write finds the database down
        self._retry_now = threading.Event()  # set by hurry(): retry a waiting batch now

    @property
    def spool(self) -> Spool:
        if self._spool is None:
            self._spool = Spool(spool_directory(settings.SPOOL_DIR, connection.settings_dict))
        return self._spool

    def _start(self) -> None:
        with self._lock:
            if self._started:
                return
            for i in range(self.THREADS):
                lane = _Lane()
                self._lanes.append(lane)
                threading.Thread(
                    target=self._run, args=(lane,), name=f"decision-writer-{i}", daemon=True
                ).start()
            threading.Thread(target=self._keep, name="decision-spool", daemon=True).start()
            atexit.register(self.stop, timeout=30)
            self._started = True

    def submit(
        self,
        data: DecisionData,
        performance_window: int,
        answer: CachedAnswer | None,
        *,
        spooled_only: bool = False,
    ) -> bool:
        """Spool ``data`` and queue it to be written; False if the spool refused it (a
        full or read-only disk) and ``spooled_only``. Without ``spooled_only``, what the
        spool refuses is queued all the same, kept in memory only."""
        self._start()
        try:
            segment: Segment | None = self.spool.append(data)  # durable against a kill now
        except OSError as err:
            spool_outage.refused(err)
            if spooled_only:
                return False
            SPOOL_REFUSED.labels("queued").inc()
            segment = None
        else:
            spool_outage.took()
        session_id = data.session_id
        with self._lock:
            self._pending[session_id] = self._pending.get(session_id, 0) + 1
        WRITER_BACKLOG.inc()
        self._lanes[hash(session_id) % self.THREADS].add(
            _Job(data, performance_window, answer, segment), self.BATCH
        )
        return True

    def store_now(
        self, data: DecisionData, performance_window: int, answer: CachedAnswer | None
    ) -> None:
        """Write ``data`` in this thread, now: the spool refused it. Raises what
        database_down() calls down (nothing is then written)."""
        if answer is not None:
            self._remember([answer])
        try:
            _store([data], performance_window, self.spool)
        finally:
            connections.close_all()
        count([data])

    def hurry(self, session_id: uuid.UUID | None = None) -> None:
        """Write what has been gathered now: of one session's thread, or of every thread."""
        if not self._started:
            return
        self._retry_now.set()
        if session_id is None:
            for lane in self._lanes:
                lane.hurry()
        else:
            self._lanes[hash(session_id) % self.THREADS].hurry()

    def _run(self, lane: _Lane) -> None:
        while True:
            batch = lane.gather(self.GATHER_SECONDS, self.BATCH)
            try:
                if batch:
                    self._write(batch)
            except Exception:  # a bug here must not stop this thread's later writes
                logger.exception("The decision writer failed on a batch of %d", len(batch))

    def _write(self, jobs: list[_Job]) -> None:
        batch = [job.data for job in jobs]
        count(batch)
        window = max(job.performance_window for job in jobs)
        self._remember([job.answer for job in jobs if job.answer is not None])
        try:
            self._store_until_done(batch, window)
        finally:
            WRITER_BACKLOG.dec(len(batch))
            with self._lock:
                for data in batch:
                    left = self._pending.get(data.session_id, 1) - 1
                    if left:
                        self._pending[data.session_id] = left
                    else:
                        self._pending.pop(data.session_id, None)
        for job in jobs:
            if job.segment is not None:
                self.spool.settle(job.segment)

    def _store_until_done(self, batch: list[DecisionData], window: int) -> None:
        wait = self.RETRY_FIRST_SECONDS
        while True:
            try:
                _store(batch, window, self.spool)
            except DATABASE_DOWN as err:
                if not self._outage.is_set():
                    self._outage.set()
                    logger.warning(
                        "Decisions wait in the spool: the database is unreachable (%s: %s); "
                        "retrying.",
                        type(err).__name__,
                        err,
                    )
                self._retry_now.wait(wait)  # hurry() cuts the wait short
                self._retry_now.clear()
                wait = min(wait * 2, self.RETRY_MAX_SECONDS)
                continue
            finally:
                connections.close_all()  # hand the connection back (to the pool)
            if self._outage.is_set():
                self._outage.clear()
                logger.warning("The database answers again: spooled decisions are written.")
            return

    def _keep(self) -> None:
        """Sync the spool every second; replay what dead processes left, now and then."""
        next_replay = 0.0
        while True:
            self.spool.sync()
            if time.monotonic() >= next_replay and not self._outage.is_set():
                next_replay = time.monotonic() + self.REPLAY_SECONDS
                self.replay()
            time.sleep(self.spool.SYNC_SECONDS)

    def replay(self, spool: Spool | None = None) -> int:
        """Write what dead processes left in the spool (logged, never raised)."""
        spool = spool or self.spool

        def write(batch: Sequence[DecisionData]) -> None:  # the policy is read only if needed
            _store(list(batch), policy_values().performance_window, spool)

        try:
            return spool.replay(write)
        except Exception as err:  # the segment stays for the next try
            logger.warning(
                "Spooled decisions could not be replayed yet (%s: %s)", type(err).__name__, err
            )
            return 0
        finally:
            connections.close_all()

    @staticmethod
    def _remember(entries: list[CachedAnswer]) -> None:
        try:
            answers_remember(entries)
        except Exception:  # the cache is a fallback's fallback: log, and write the decision
            logger.exception("Could not cache %d answers", len(entries))

    def pending(self, session_id: uuid.UUID | None = None) -> int:
        with self._lock:
            if session_id is None:
                return sum(self._pending.values())
            return self._pending.get(session_id, 0)

    def drain(self, timeout: float = 30.0) -> None:
        self.hurry()
        deadline = time.monotonic() + timeout
        while self.pending() and time.monotonic() < deadline:
            time.sleep(0.005)

    def stop(self, timeout: float = 30.0) -> None:
        """At exit: write what is pending (up to ``timeout``) and delete the spool's
        committed segments; what is left stays spooled."""
        self.drain(timeout)
        self.spool.sync()
        self.spool.close()


def _store(batch: list[DecisionData], window: int, spool: Spool) -> None:
    """Write ``batch``; if the database refuses it as data, write its decisions one by
    one and set aside the ones it refuses. Raises only what database_down() calls down."""
    try:
        decisions_record(batch, performance_window=window)
        return
    except Exception as err:
        if database_down(err):
            raise
        if len(batch) == 1:
            logger.exception("Could not record decision %s; set aside", batch[0].request_id)
            spool.reject(batch[0], sys.exc_info()[1] or RuntimeError())
            return
    for data in batch:  # one bad decision must not take the others with it
        _store([data], window, spool)


_writer = _Writer()


def record_later(
    data: DecisionData, *, performance_window: int, answer: CachedAnswer | None = None
) -> None:
    """Write the decision (and cache the answer) behind the answer; this completes
    even if the caller has gone. If the spool refuses it, it waits in memory."""
    _writer.submit(data, performance_window, answer)


async def record_kept(
    data: DecisionData, *, performance_window: int, answer: CachedAnswer | None = None
) -> None:
    """As record_later, for a decision whose answer is about to go out: it is kept first,
    in the spool or, when the spool refuses it, in the database at once. When neither
    takes it, raises UnavailableError: no answer goes out without its record, unless
    FLYWHEEL_ANSWER_UNRECORDED (then it waits in memory, as record_later's would)."""
    if _writer.submit(data, performance_window, answer, spooled_only=True):
        return
    try:
        await asyncio.to_thread(_writer.store_now, data, performance_window, answer)
    except DATABASE_DOWN as err:
        if settings.ANSWER_UNRECORDED:
            _writer.submit(data, performance_window, answer)
            return
        SPOOL_REFUSED.labels("refused").inc()
        raise UnavailableError(
            "The answer could not be recorded (the decision spool's disk and the database "
            f"both refuse it), so it was not sent; try again in {DATABASE_RETRY_SECONDS} "
            "seconds.",
            details={"retry_after": DATABASE_RETRY_SECONDS},
        ) from err
    SPOOL_REFUSED.labels("stored_now").inc()


def pending(session_id: uuid.UUID | None = None) -> int:
    return _writer.pending(session_id)


def hurry(session_id: uuid.UUID | None = None) -> None:
    _writer.hurry(session_id)


def drain(timeout: float = 30.0) -> None:
    """Block until every pending write of this process is done (tests, commands, exit)."""
    _writer.drain(timeout)


def writer_stop(timeout: float = 30.0) -> None:
    """A clean stop (a server's shutdown): as _Writer.stop."""
    _writer.stop(timeout)


def writer_start() -> None:
    """Start the writer threads and the spool's keeper now (a server's start-up), so that
    what dead processes left is replayed before the first question arrives."""
    _writer._start()


def decision_spool(directory: Path | None = None) -> Spool:
    """This database's spool: under settings.SPOOL_DIR, or under ``directory``."""
    if directory is None:
        return _writer.spool
    return Spool(spool_directory(directory, connection.settings_dict))


def spooled_replay(directory: Path | None = None) -> int:
    """Write what dead processes left in this database's spool (under settings.SPOOL_DIR,
    or ``directory``); returns how many decisions. Failures are logged, not raised:
    what could not be written stays for the next try."""
    return _writer.replay(decision_spool(directory))

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
import logging
import sys
import threading
import time
import uuid
from collections.abc import Sequence
from pathlib import Path

from django.conf import settings
from django.db import connection, connections

from flywheel.errors import DATABASE_RETRY_SECONDS, UnavailableError
from flywheel.metrics import SPOOL_REFUSED, WRITER_BACKLOG, WRITER_MEMORY
from routing.recording.answers import CachedAnswer, answers_remember
from routing.recording.backlog import Backlog, Job, Lane
from routing.recording.decision import DecisionData
from routing.recording.spool import Segment, Spool, encode, spool_directory, spool_outage
from routing.recording.store import DATABASE_DOWN, database_down, decisions_record
from routing.recording.tally import count
from routing.selection.state import (
    policy_values,
)

logger = logging.getLogger(__name__)


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

    THREADS = 1  # spilled decisions are read back by the first: more would reorder sessions
    BATCH = 200
    GATHER_SECONDS = 0.1
    RETRY_FIRST_SECONDS = 0.2
    RETRY_MAX_SECONDS = 5.0
    REPLAY_SECONDS = 30.0

    def __init__(self) -> None:
        self._lanes: list[Lane] = []
        self._lock = threading.Lock()
        self._backlog = Backlog(settings.WRITER_MEMORY_BYTES)
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
                lane = Lane()
                self._lanes.append(lane)
                threading.Thread(
                    target=self._run, args=(lane, i == 0), name=f"decision-writer-{i}", daemon=True
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
        """Spool ``data`` and queue it to be written; False if it was not taken: the
        spool refused it (a full or read-only disk) and ``spooled_only``, or memory is
        full too (routing.recording.backlog). Without ``spooled_only``, what the spool
        refuses is queued all the same while memory has room, kept in memory only."""
        self._start()
        line = encode(data)
        backlog = self._backlog
        with backlog.lock:  # a spill cannot end between this decision's choice and its line
            spill = backlog.spills(len(line))
            try:
                segment: Segment | None = self.spool.append_line(line, spill=spill)
            except OSError as err:
                spool_outage.refused(err)
                if spooled_only or spill:
                    return False
                SPOOL_REFUSED.labels("queued").inc()
                segment = None
            else:
                spool_outage.took()
            size = 0 if spill else len(line)
            backlog.add(data.conversation, size)
        WRITER_BACKLOG.inc()
        if spill:  # only the spool holds it: the first thread reads it back
            self._lanes[0].arrived(batch_full=False)
        else:
            WRITER_MEMORY.inc(size)
            self._lanes[hash(data.conversation) % self.THREADS].add(
                Job(data, performance_window, answer, segment, size), self.BATCH
            )
        return True

    @property
    def full(self) -> bool:
        """Whether decisions go to the spool alone: the writer is far behind."""
        return self._backlog.spilling

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

    def _run(self, lane: Lane, reads_spilled: bool) -> None:
        while True:
            batch = lane.gather(self.GATHER_SECONDS, self.BATCH)
            try:
                if reads_spilled and len(batch) < self.BATCH and self._backlog.spilling:
                    batch += self._unspill(self.BATCH - len(batch))
                if batch:
                    self._write(batch)
            except Exception:  # a bug here must not stop this thread's later writes
                logger.exception("The decision writer failed on a batch of %d", len(batch))

    def _unspill(self, limit: int) -> list[Job]:
        """Up to ``limit`` spilled decisions, read back from the spool; once none is left,
        decisions are held in memory again."""
        taken = self.spool.read_spilled(limit)
        with self._backlog.lock:
            if not self.spool.spilled():
                self._backlog.spilling = False
        if self._backlog.spilling:
            self._lanes[0].hurry()  # more to read back: no gathering wait
        return [Job(data, None, None, segment, 0) for segment, data in taken]

    def _write(self, jobs: list[Job]) -> None:
        batch = [job.data for job in jobs]
        count(batch)
        windows = [job.performance_window for job in jobs if job.performance_window]
        window = max(windows) if windows else policy_values().performance_window
        self._remember([job.answer for job in jobs if job.answer is not None])
        try:
            self._store_until_done(batch, window)
            for job in jobs:  # settled before counted written: drain() then sees both
                if job.segment is not None:
                    self.spool.settle(job.segment)
        finally:
            WRITER_BACKLOG.dec(len(batch))
            WRITER_MEMORY.dec(sum(job.size for job in jobs))
            self._backlog.written(jobs)

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
        return self._backlog.pending(session_id)

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
    even if the caller has gone. If the spool refuses it, it waits in memory while
    memory has room (FLYWHEEL_WRITER_MEMORY_MB); past that it is lost, and counted."""
    if not _writer.submit(data, performance_window, answer):
        SPOOL_REFUSED.labels("dropped").inc()


async def record_kept(
    data: DecisionData, *, performance_window: int, answer: CachedAnswer | None = None
) -> None:
    """As record_later, for a decision whose answer is about to go out: it is kept first,
    in the spool or, when the spool refuses it, in the database at once (unless the
    writer is already far behind). When neither takes it, raises UnavailableError: no
    answer goes out without its record, unless FLYWHEEL_ANSWER_UNRECORDED (then it is
    left to record_later)."""
    if _writer.submit(data, performance_window, answer, spooled_only=True):
        return
    cause: BaseException | None = None
    if not _writer.full:  # a synchronous write would wait behind the writer's backlog
        try:
            await asyncio.to_thread(_writer.store_now, data, performance_window, answer)
        except DATABASE_DOWN as err:
            cause = err
        else:
            SPOOL_REFUSED.labels("stored_now").inc()
            return
    if settings.ANSWER_UNRECORDED:
        record_later(data, performance_window=performance_window, answer=answer)
        return
    SPOOL_REFUSED.labels("refused").inc()
    raise UnavailableError(
        "The answer could not be recorded (the decision spool's disk refuses it, and the "
        "database is down or behind), so it was not sent; try again in "
        f"{DATABASE_RETRY_SECONDS} seconds.",
        details={"retry_after": DATABASE_RETRY_SECONDS},
    ) from cause


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

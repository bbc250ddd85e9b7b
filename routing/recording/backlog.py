"""What the decision writer has yet to write, and how much of it memory may hold.

The writer (routing.recording.writer) stores decisions behind the answers. While
the database is slow or locked, decisions arrive faster than they are written;
kept in memory they would grow without bound (a 20 s lock once held 5,287 of
them, and the memory was never given back). So the backlog holds at most
FLYWHEEL_WRITER_MEMORY_MB of them in memory (as their spooled size); past that,
each decision is written to the spool alone ("spilled") and read back from it, in
order, once the writer has caught up with what memory holds. While decisions are
spilled, every new one is too, so a session's decisions are written in order.
When the spool cannot take a spilled decision either, the writer refuses it.
"""

from __future__ import annotations

import collections
import threading
import uuid
from collections.abc import Iterable
from dataclasses import dataclass

from routing.recording.answers import CachedAnswer
from routing.recording.decision import DecisionData
from routing.recording.spool import Segment


@dataclass(frozen=True)
class Job:
    data: DecisionData
    performance_window: int | None  # None: the policy's, when written (read back from the spool)
    answer: CachedAnswer | None
    segment: Segment | None  # None: the spool could not be written (logged)
    size: int  # what memory holds of it, as its spooled size (0: spilled, read back)


class Lane:
    """One writer thread's jobs. Adding one wakes the thread only if it waits for a
    first job, or to end a gathering that has reached a batch."""

    def __init__(self) -> None:
        self._jobs: collections.deque[Job] = collections.deque()
        self._arrived = threading.Event()  # set: jobs may wait; the thread does not sleep
        self._hurried = threading.Event()  # set: write what has gathered, now

    def add(self, job: Job, batch: int) -> None:
        self._jobs.append(job)
        self.arrived(len(self._jobs) >= batch)

    def arrived(self, batch_full: bool) -> None:
        """A job waits (in this lane, or spilled): wake the thread if it sleeps."""
        if not self._arrived.is_set():  # an attribute read: no lock while the thread works
            self._arrived.set()
        if batch_full:
            self._hurried.set()

    def hurry(self) -> None:
        self._hurried.set()
        self._arrived.set()

    def gather(self, seconds: float, batch: int) -> list[Job]:
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


class Backlog:
    """Decisions not yet written, counted per session (a reader of its own writes waits
    for them), and the bytes of them memory holds, up to ``limit``."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.lock = threading.Lock()  # held while a decision is admitted and spooled
        self.held = 0  # bytes in memory
        self.spilling = False
        self._pending: dict[uuid.UUID | None, int] = {}

    def spills(self, size: int) -> bool:
        """Whether a decision of ``size`` bytes goes to the spool alone (under ``lock``):
        memory is full, or earlier decisions were spilled and are still to be written."""
        if not self.spilling and self.held + size > self.limit:
            self.spilling = True
        return self.spilling

    def add(self, conversation: uuid.UUID, size: int) -> None:
        """Under ``lock``: one more decision of ``conversation`` (DecisionData.conversation),
        ``size`` bytes in memory."""
        self.held += size
        self._pending[conversation] = self._pending.get(conversation, 0) + 1

    def written(self, jobs: Iterable[Job]) -> None:
        with self.lock:
            for job in jobs:
                self.held -= job.size
                left = self._pending.get(job.data.conversation, 1) - 1
                if left:
                    self._pending[job.data.conversation] = left
                else:
                    self._pending.pop(job.data.conversation, None)

    def pending(self, session_id: uuid.UUID | None = None) -> int:
        with self.lock:
            if session_id is None:
                return sum(self._pending.values())
            return self._pending.get(session_id, 0)

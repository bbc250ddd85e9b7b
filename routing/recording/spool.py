"""The decision spool: each decision is on local disk before its answer goes out.

The writer threads (routing.recording.writer) store decisions behind the answers,
so between an answer and its commit the decision lives only in the process.
The spool makes that window durable: every decision is appended, as one JSON
line, to a segment file of this process before the answer is sent, and a
segment is deleted once everything in it is committed. What a process held
when it was killed, or while the database was down when it stopped, stays
in its segment and is replayed by the next process that looks (at start-up
and every REPLAY_SECONDS): inserts are keyed by request id, so a decision
that was committed before the kill is not written twice.

Each process holds an exclusive lock (flock) on its segments while it lives;
the kernel releases it when the process dies however it dies, which is how
another process knows a segment is an orphan. A write() reaches the page
cache at once, so a killed process loses nothing; each segment is fsynced
every SYNC_SECONDS, so a machine crash loses at most the last second.

Each line is framed: the CRC-32 of its JSON in eight hex digits, a space, then
the JSON. A write that ends short (a full disk) is completed or cut back to the
line before it, and if it can be neither, the next line starts on a line of its
own; so a torn line is detected on replay and skipped, and the lines after it
survive. A segment is deleted as soon as everything in it is committed (the one
being written once it is ROTATE_SECONDS old), so committed decisions do not
hold the disk.

Segments live in a directory per database (one spool must not replay into
another database), under FLYWHEEL_SPOOL_DIR (default: var/spool). A decision
the database refuses as data (not as an outage) is set aside in
``rejected.jsonl`` beside them, with the error, rather than lost or retried
forever.
"""

from __future__ import annotations

import collections
import contextlib
import errno
import fcntl
import hashlib
import json
import logging
import os
import re
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from django.conf import settings

from routing.recording.decision import DecisionData
from routing.recording.framing import decode, encode, lines, unframed

logger = logging.getLogger(__name__)

SEGMENT_SUFFIX = ".jsonl"
REJECTED = "rejected.jsonl"


class Segment:
    """One file of spooled decisions, locked by this process while it is open."""

    def __init__(self, path: Path, fd: int) -> None:
        self.path = path
        self.fd = fd
        self.appended = 0
        self.bytes = 0  # what its complete lines hold: a write that failed is cut back to it
        self.settled = 0
        self.dirty = False
        self.torn = False  # a failed write left part of a line that could not be cut
        self.opened = time.monotonic()
        self.spilled = False  # its decisions are in no writer's memory: read back
        self.read = 0  # ... the bytes read back so far

    @property
    def unread(self) -> bool:
        return self.spilled and self.read < self.bytes

    @property
    def done(self) -> bool:
        return self.settled >= self.appended


def _open_locked(directory: Path) -> Segment:
    """A new segment, locked before it gets the name other processes look for."""
    name = f"{os.getpid()}-{time.time_ns()}"
    temporary = directory / f"{name}.new"
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)
    path = directory / f"{name}{SEGMENT_SUFFIX}"
    os.rename(temporary, path)
    return Segment(path, fd)


def _write_all(fd: int, line: bytes) -> None:
    """Write all of ``line``: a write may take only part of it (a disk filling up)."""
    view = memoryview(line)
    while view:
        written = os.write(fd, view)
        if written <= 0:
            raise OSError(errno.ENOSPC, "the spool's disk took nothing")
        view = view[written:]


def _cut_back(segment: Segment) -> None:
    """Take back what a failed write left of its line; if that fails too, the next line
    starts on a line of its own (the torn one is then skipped on replay)."""
    try:
        os.ftruncate(segment.fd, segment.bytes)
    except OSError:
        segment.torn = True


class Spool:
    """Append decisions, settle them once committed, replay what dead processes left."""

    ROTATE_ENTRIES = 1000  # a segment is closed past this many entries
    # ... or past this many bytes (FLYWHEEL_SPOOL_SEGMENT_BYTES): a file is deleted only
    # whole, so one holding large decisions would otherwise grow with every entry;
    # and the one being written, once all it holds is committed, past this age:
    ROTATE_SECONDS = 1.0
    SYNC_SECONDS = 1.0
    REPLAY_BATCH = 200

    def __init__(self, directory: Path, rotate_bytes: int | None = None) -> None:
        self.directory = directory
        self.rotate_bytes = settings.SPOOL_SEGMENT_BYTES if rotate_bytes is None else rotate_bytes
        self._lock = threading.Lock()
        self._current: Segment | None = None
        self._spill: Segment | None = None  # the spilled segment being written
        self._spilled: collections.deque[Segment] = collections.deque()  # not all read back
        self._open: dict[Path, Segment] = {}
        self._pid = os.getpid()

    # --- this process's segments ----------------------------------------------
    def append(self, data: DecisionData, *, spill: bool = False) -> Segment:
        """Write ``data`` to this process's segment, whole; return the segment, to be
        settled once the decision is committed. Raises OSError when the line could not
        be written whole (a full or read-only disk): then none of it counts."""
        return self.append_line(encode(data), spill=spill)

    def append_line(self, line: bytes, *, spill: bool = False) -> Segment:
        """As append, for a line already encoded. ``spill``: the writer holds no copy in
        memory (its backlog is full), so the line goes to a spilled segment, from which
        read_spilled gives it back in order."""
        with self._lock:
            segment = self._segment(spill)
            if segment.torn:  # what a failed write left ends here, on a line of its own
                line = b"\n" + line
                segment.bytes = os.fstat(segment.fd).st_size  # the torn part stays before it
            try:
                _write_all(segment.fd, line)
            except OSError:
                _cut_back(segment)
                raise
            segment.torn = False
            segment.appended += 1
            segment.bytes += len(line)
            segment.dirty = True
            if spill and (not self._spilled or self._spilled[-1] is not segment):
                self._spilled.append(segment)
            if segment.appended >= self.ROTATE_ENTRIES or segment.bytes >= self.rotate_bytes:
                if spill:  # the next decision opens a new segment
                    self._spill = None
                else:
                    self._current = None
            return segment

    def _segment(self, spill: bool) -> Segment:
        if self._pid != os.getpid():  # a forked child: the parent's segments are not its own
            self._pid, self._current, self._spill, self._open = os.getpid(), None, None, {}
            self._spilled.clear()
        segment = self._spill if spill else self._current
        if segment is None:
            self.directory.mkdir(parents=True, exist_ok=True)
            segment = _open_locked(self.directory)
            self._open[segment.path] = segment
            if spill:
                segment.spilled = True
                self._spill = segment
            else:
                self._current = segment
        return segment

    def spilled(self) -> bool:
        """Whether spilled decisions wait to be read back."""
        with self._lock:
            return any(segment.unread for segment in self._spilled)

    def read_spilled(self, limit: int) -> list[tuple[Segment, DecisionData]]:
        """Up to ``limit`` spilled decisions not read back yet, oldest first, each with
        its segment (to settle once committed). A line that cannot be read is skipped."""
        with self._lock:
            while (
                self._spilled
                and not self._spilled[0].unread
                and (self._spilled[0] is not self._spill)
            ):
                self._spilled.popleft()
            if not self._spilled:
                return []
            segment = self._spilled[0]
            start, end = segment.read, segment.bytes  # lines before ``end`` are whole
        taken: list[tuple[Segment, DecisionData]] = []
        position = start
        with segment.path.open("rb") as file:
            file.seek(start)
            while position < end and len(taken) < limit:
                line = file.readline()
                position += len(line)
                try:
                    taken.append((segment, decode(line)))
                except (ValueError, TypeError, KeyError) as err:
                    logger.warning(
                        "A spilled line of %s is unreadable, skipped: %s", segment.path, err
                    )
        with self._lock:
            segment.read = position
        return taken

    def settle(self, segment: Segment, count: int = 1) -> None:
        """``count`` decisions of ``segment`` are committed (or set aside as rejected)."""
        with self._lock:
            segment.settled += count
            if segment.done and segment.path in self._open:
                self._retire(segment)

    def _retire(self, segment: Segment) -> None:
        """Delete a committed segment: at once, or one being written once it is
        ROTATE_SECONDS old (sooner would open a file per decision when they come slowly)."""
        if segment.unread:  # spilled, and some of it is yet to be read back
            return
        if segment is self._current or segment is self._spill:
            if time.monotonic() - segment.opened < self.ROTATE_SECONDS:
                return
            if segment is self._current:
                self._current = None
            else:
                self._spill = None
        self._remove(segment)

    def _remove(self, segment: Segment) -> None:
        del self._open[segment.path]
        if segment in self._spilled:
            self._spilled.remove(segment)
        os.unlink(segment.path)  # before closing: nobody can lock it in between
        os.close(segment.fd)

    def sync(self) -> None:
        """fsync the segments written to since the last call; delete the one being written
        if it is committed and old enough (see _retire)."""
        with self._lock:
            for current in (self._current, self._spill):
                if current is not None and current.done:
                    self._retire(current)
            dirty = [s for s in self._open.values() if s.dirty]
            for segment in dirty:
                segment.dirty = False
        for segment in dirty:
            with contextlib.suppress(OSError):  # removed meanwhile: all of it was committed
                os.fsync(segment.fd)

    def close(self) -> None:
        """Delete this process's fully committed segments (at exit); the rest stay for
        the next process to replay."""
        with self._lock:
            self._current = self._spill = None
            for segment in list(self._open.values()):
                if segment.done:
                    self._remove(segment)

    def held(self) -> int:
        """Decisions appended by this process and not yet settled."""
        with self._lock:
            return sum(s.appended - s.settled for s in self._open.values())

    def reject(self, data: DecisionData, error: BaseException) -> None:
        """Set ``data`` aside: the database refused it as data, not as an outage. If the
        spool cannot be written either, say so in the log (never raises)."""
        decision = json.loads(unframed(encode(data)))
        entry = {"error": f"{type(error).__name__}: {error}", "decision": decision}
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            with (self.directory / REJECTED).open("a", encoding="ascii") as file:
                file.write(json.dumps(entry, default=str) + "\n")
        except OSError as err:
            logger.error("Decision %s refused and not set aside: %s", data.request_id, err)

    # --- what other processes left -----------------------------------------------
    def replay(self, write: Callable[[Sequence[DecisionData]], None]) -> int:
        """Write what dead processes' segments hold, through ``write`` (which must skip
        request ids already stored), and delete each segment once written. Returns how
        many decisions were replayed; raises what ``write`` raised (the segment stays)."""
        if not self.directory.is_dir():
            return 0
        replayed = 0
        for path in sorted(self.directory.glob(f"*{SEGMENT_SUFFIX}")):
            if path in self._open or path.name == REJECTED:
                continue
            replayed += self._replay_one(path, write)
        return replayed

    def _replay_one(self, path: Path, write: Callable[[Sequence[DecisionData]], None]) -> int:
        try:
            fd = os.open(path, os.O_RDONLY)
        except FileNotFoundError:  # replayed or removed by its owner meanwhile
            return 0
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:  # its process is alive (or another is replaying it)
                return 0
            if os.fstat(fd).st_nlink == 0:  # its owner removed it just before the lock
                return 0
            batch: list[DecisionData] = []
            count = 0
            for data in lines(path):
                batch.append(data)
                if len(batch) >= self.REPLAY_BATCH:
                    write(batch)
                    count, batch = count + len(batch), []
            if batch:
                write(batch)
                count += len(batch)
            os.unlink(path)
            if count:
                logger.warning("Replayed %d spooled decisions of %s", count, path.name)
            return count
        finally:
            os.close(fd)


class SpoolOutage:
    """Says once that the spool refuses writes, and once that it takes them again: a
    full disk must not write a log line per decision."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.failing = False
        self.refusals = 0

    def refused(self, err: OSError) -> None:
        with self._lock:
            self.refusals += 1
            if self.failing:
                return
            self.failing = True
        logger.error(
            "The decision spool refuses writes (%s); until it takes them again, answers "
            "are recorded in the database before they go out.",
            err,
        )

    def took(self) -> None:
        if not self.failing:  # the usual case, without the lock
            return
        with self._lock:
            refusals, self.failing, self.refusals = self.refusals, False, 0
        logger.warning("The decision spool takes writes again (%d refused meanwhile).", refusals)


spool_outage = SpoolOutage()


# Engines that are another's under a name of their own: the same database, the same spool.
_ENGINES = {"flywheel.postgres": "django.db.backends.postgresql"}


def spool_directory(base: Path, database: dict[str, Any]) -> Path:
    """The spool directory of one database: its name, plus a digest of where it is."""
    engine = str(database.get("ENGINE"))
    engine = _ENGINES.get(engine, engine)
    where = f"{engine}|{database.get('HOST')}|{database.get('PORT')}"
    name = str(database.get("NAME") or "default")
    readable = re.sub(r"[^A-Za-z0-9_.-]", "_", Path(name).name)[:60]
    digest = hashlib.sha256(f"{where}|{name}".encode()).hexdigest()[:8]
    return base / f"{readable}-{digest}"

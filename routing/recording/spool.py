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

Segments live in a directory per database (one spool must not replay into
another database), under FLYWHEEL_SPOOL_DIR (default: var/spool). A decision
the database refuses as data (not as an outage) is set aside in
``rejected.jsonl`` beside them, with the error, rather than lost or retried
forever.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import os
import re
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from django.conf import settings

from flywheel.jsonout import dumps
from routing.recording.decision import DecisionData
from routing.selection.attempt import Attempt

logger = logging.getLogger(__name__)

SEGMENT_SUFFIX = ".jsonl"
REJECTED = "rejected.jsonl"


def encode(data: DecisionData) -> bytes:
    """One line of JSON (flywheel.jsonout: a lone surrogate in an answer survives as an
    escape; no newline inside, as JSON escapes them)."""
    values = dict(vars(data))  # shallow: the encoder walks the rest (asdict's copy costs 4x)
    values["attempts"] = [vars(a) for a in data.attempts]
    return dumps(values, default=str) + b"\n"


def decode(line: bytes) -> DecisionData:

    values: dict[str, Any] = json.loads(line)
    values["request_id"] = uuid.UUID(values["request_id"])
    if values["session_id"] is not None:
        values["session_id"] = uuid.UUID(values["session_id"])
    values["attempts"] = tuple(Attempt(**a) for a in values["attempts"])
    return DecisionData(**values)


class Segment:
    """One file of spooled decisions, locked by this process while it is open."""

    def __init__(self, path: Path, fd: int) -> None:
        self.path = path
        self.fd = fd
        self.appended = 0
        self.bytes = 0
        self.settled = 0
        self.dirty = False

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


def _lines(path: Path) -> Iterator[DecisionData]:
    """The decisions in a segment; a torn last line (a machine crash mid-write) is skipped."""
    with path.open("rb") as file:
        for number, line in enumerate(file, start=1):
            try:
                yield decode(line)
            except (ValueError, TypeError, KeyError) as err:
                logger.warning("Spool %s line %d is unreadable, skipped: %s", path, number, err)


class Spool:
    """Append decisions, settle them once committed, replay what dead processes left."""

    ROTATE_ENTRIES = 1000  # a segment fully committed past this many entries is deleted
    # ... or past this many bytes (FLYWHEEL_SPOOL_SEGMENT_BYTES): a file is deleted only
    # whole, so one holding large decisions would otherwise grow with every entry.
    SYNC_SECONDS = 1.0
    REPLAY_BATCH = 200

    def __init__(self, directory: Path, rotate_bytes: int | None = None) -> None:
        self.directory = directory
        self.rotate_bytes = settings.SPOOL_SEGMENT_BYTES if rotate_bytes is None else rotate_bytes
        self._lock = threading.Lock()
        self._current: Segment | None = None
        self._open: dict[Path, Segment] = {}
        self._pid = os.getpid()

    # --- this process's segments ----------------------------------------------
    def append(self, data: DecisionData) -> Segment:
        """Write ``data`` to this process's segment (one write call); return the segment,
        to be settled once the decision is committed."""
        line = encode(data)
        with self._lock:
            segment = self._segment()
            os.write(segment.fd, line)
            segment.appended += 1
            segment.bytes += len(line)
            segment.dirty = True
            if segment.appended >= self.ROTATE_ENTRIES or segment.bytes >= self.rotate_bytes:
                self._current = None  # the next decision opens a new segment
            return segment

    def _segment(self) -> Segment:
        if self._pid != os.getpid():  # a forked child: the parent's segments are not its own
            self._pid, self._current, self._open = os.getpid(), None, {}
        if self._current is None:
            self.directory.mkdir(parents=True, exist_ok=True)
            self._current = _open_locked(self.directory)
            self._open[self._current.path] = self._current
        return self._current

    def settle(self, segment: Segment, count: int = 1) -> None:
        """``count`` decisions of ``segment`` are committed (or set aside as rejected)."""
        with self._lock:
            segment.settled += count
            if segment.done and segment is not self._current and segment.path in self._open:
                self._remove(segment)

    def _remove(self, segment: Segment) -> None:
        del self._open[segment.path]
        os.unlink(segment.path)  # before closing: nobody can lock it in between
        os.close(segment.fd)

    def sync(self) -> None:
        """fsync the segments written to since the last call."""
        with self._lock:
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
            self._current = None
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
        entry = {"error": f"{type(error).__name__}: {error}", "decision": json.loads(encode(data))}
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
            for data in _lines(path):
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


def spool_directory(base: Path, database: dict[str, Any]) -> Path:
    """The spool directory of one database: its name, plus a digest of where it is."""
    where = f"{database.get('ENGINE')}|{database.get('HOST')}|{database.get('PORT')}"
    name = str(database.get("NAME") or "default")
    readable = re.sub(r"[^A-Za-z0-9_.-]", "_", Path(name).name)[:60]
    digest = hashlib.sha256(f"{where}|{name}".encode()).hexdigest()[:8]
    return base / f"{readable}-{digest}"

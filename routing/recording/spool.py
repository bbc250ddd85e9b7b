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
import uuid
import zlib
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
    """One framed line: the CRC-32 of the JSON, then the JSON (flywheel.jsonout: a lone
    surrogate in an answer survives as an escape; no newline inside, as JSON escapes
    them)."""
    values = dict(vars(data))  # shallow: the encoder walks the rest (asdict's copy costs 4x)
    values["attempts"] = [vars(a) for a in data.attempts]
    body = dumps(values, default=str)
    return b"%08x %s\n" % (zlib.crc32(body), body)


def unframed(line: bytes) -> bytes:
    """The JSON of a framed line; ValueError if the line is torn or not one of ours. A
    line of bare JSON (written before lines were framed) is taken as it is."""
    line = line.rstrip(b"\n")
    if line.startswith(b"{"):
        return line
    crc, _, body = line.partition(b" ")
    if len(crc) != 8 or not body or int(crc, 16) != zlib.crc32(body):
        raise ValueError("a torn or damaged line (its checksum does not match)")
    return body


def decode(line: bytes) -> DecisionData:
    values: dict[str, Any] = json.loads(unframed(line))
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
        self.bytes = 0  # what its complete lines hold: a write that failed is cut back to it
        self.settled = 0
        self.dirty = False
        self.torn = False  # a failed write left part of a line that could not be cut
        self.opened = time.monotonic()

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


def _lines(path: Path) -> Iterator[DecisionData]:
    """The decisions in a segment; a torn line (a machine crash or a full disk mid-write)
    is skipped, and the lines after it are read."""
    with path.open("rb") as file:
        for number, line in enumerate(file, start=1):
            try:
                yield decode(line)
            except (ValueError, TypeError, KeyError) as err:
                logger.warning("Spool %s line %d is unreadable, skipped: %s", path, number, err)


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
        self._open: dict[Path, Segment] = {}
        self._pid = os.getpid()

    # --- this process's segments ----------------------------------------------
    def append(self, data: DecisionData) -> Segment:
        """Write ``data`` to this process's segment, whole; return the segment, to be
        settled once the decision is committed. Raises OSError when the line could not
        be written whole (a full or read-only disk): then none of it counts."""
        line = encode(data)
        with self._lock:
            segment = self._segment()
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
            if segment.done and segment.path in self._open:
                self._retire(segment)

    def _retire(self, segment: Segment) -> None:
        """Delete a committed segment: at once, or the one being written once it is
        ROTATE_SECONDS old (sooner would open a file per decision when they come slowly)."""
        if segment is self._current:
            if time.monotonic() - segment.opened < self.ROTATE_SECONDS:
                return
            self._current = None
        self._remove(segment)

    def _remove(self, segment: Segment) -> None:
        del self._open[segment.path]
        os.unlink(segment.path)  # before closing: nobody can lock it in between
        os.close(segment.fd)

    def sync(self) -> None:
        """fsync the segments written to since the last call; delete the one being written
        if it is committed and old enough (see _retire)."""
        with self._lock:
            current = self._current
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

"""A real Flywheel served for a benchmark: its own database, var directory and uvicorn.

Shared by bench/load.py and bench/learning_http.py. A Server names a checkout
and the environment it runs with (database, cache prefix, var directory);
``fresh_database`` recreates and migrates its database, ``served`` runs
uvicorn on it until the block ends, with a monitoring connection to the
database (``Server.pg``) for what the benchmark checks at the end: the stored
decisions, the database's processes.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from bench.common import free_port, manage, process_tree, recreate_database, wait_for
from bench.rest import serve

LOCAL_HOSTS = {"127.0.0.1", "localhost", "::1"}


class Postgres:
    """A monitoring connection to the bench database (its own backend is left out)."""

    def __init__(self, url: str) -> None:
        import psycopg

        self.local = urlsplit(url).hostname in LOCAL_HOSTS
        self.conn = psycopg.connect(url, autocommit=True)

    def _pids(self, where: str) -> list[int]:
        if not self.local:  # its processes are not in this machine's /proc
            return []
        rows = self.conn.execute(
            f"SELECT pid FROM pg_stat_activity WHERE {where} AND pid <> pg_backend_pid()"  # noqa: S608
        ).fetchall()
        return [int(pid) for (pid,) in rows]

    def backends(self) -> list[int]:
        """The backends serving the bench database (Flywheel's pools, autovacuum on it)."""
        return self._pids("datname = current_database()")

    def background(self) -> list[int]:
        """The cluster's own processes: WAL writer, checkpointer, background writer..."""
        return self._pids("datname IS NULL")

    def decisions(self) -> int:
        row = self.conn.execute("SELECT count(*) FROM analytics_routingdecision").fetchone()
        return int(row[0]) if row else 0

    def close(self) -> None:
        self.conn.close()


@dataclass
class Server:
    """One Flywheel under measurement, served from the checkout ``checkout``.

    ``label`` names its rounds: "Flywheel" for this checkout, "before" for the
    one given with --before (an earlier commit, as a git worktree), which gets a
    database, cache prefix and var directory of its own.
    """

    label: str
    checkout: Path
    env: dict[str, str]
    process: subprocess.Popen[bytes] | None = None
    port: int = 0
    key: str = ""
    pg: Postgres | None = None

    @property
    def database(self) -> str:
        return self.env["DATABASE_URL"]

    def web(self) -> list[int]:
        return process_tree(self.process.pid) if self.process else []


def fresh_database(server: Server) -> None:
    """Recreate ``server``'s database and migrate it; empty its var directory."""
    recreate_database(server.database)
    shutil.rmtree(server.env["FLYWHEEL_VAR_DIR"], ignore_errors=True)  # no spool to replay
    manage(server.env, "migrate", "--noinput", "-v", "0", cwd=server.checkout)


def spawned_workers(pid: int) -> int:
    """How many worker processes uvicorn (``pid``) has started so far."""
    count = 0
    for each in process_tree(pid):
        with suppress(OSError):
            count += b"spawn_main" in Path(f"/proc/{each}/cmdline").read_bytes()
    return count


def wait_for_workers(pid: int, workers: int, timeout: float = 60.0) -> None:
    """Every worker started, so that the set of Flywheel's processes is complete.

    With one worker uvicorn serves in its own process; with more, it spawns
    them (and multiprocessing's resource tracker, counted among Flywheel's).
    """
    deadline = time.monotonic() + timeout
    while workers > 1 and spawned_workers(pid) < workers and time.monotonic() < deadline:
        time.sleep(0.2)


@contextmanager
def served(server: Server, workers: int) -> Iterator[Server]:
    """uvicorn serving ``server`` on a free port with ``workers`` workers, every one of
    them up, and ``server.pg`` connected; stopped (and disconnected) at the end."""
    server.port = free_port()
    server.process = serve(server.port, workers, env=server.env, cwd=server.checkout)
    try:
        wait_for(f"http://127.0.0.1:{server.port}/healthz")
        wait_for_workers(server.process.pid, workers)
        server.pg = Postgres(server.database)
        yield server
    finally:
        if server.pg is not None:
            server.pg.close()
            server.pg = None
        stop(server.process)


def stop(process: subprocess.Popen[bytes], grace: float = 30.0) -> None:
    """Terminate; kill it and its children if it has not stopped within ``grace`` seconds."""
    process.terminate()
    try:
        process.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        for pid in process_tree(process.pid):  # uvicorn's workers too
            with suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        process.wait()


def decisions_stored(pg: Postgres, expected: int, wait: float) -> int:
    """The decisions in the database, once they reach ``expected`` or ``wait`` s have passed."""
    deadline = time.monotonic() + wait
    while (count := pg.decisions()) < expected and time.monotonic() < deadline:
        time.sleep(0.5)
    return count


def loadavg() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())

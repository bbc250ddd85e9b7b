"""Shared helpers for the benchmarks: question sets, percentiles, subprocess servers."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data"
# Tells this checkout's databases and cache prefixes from another's on the same machine.
CHECKOUT = hashlib.sha1(str(ROOT).encode(), usedforsecurity=False).hexdigest()[:8]
REDIS = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379")


def own_services(name: str, **extra: str) -> tuple[str, dict[str, str]]:
    """The PostgreSQL URL and the settings of a benchmark that runs Django in its own
    process: a database and a cache prefix of its own, named after ``name`` and this
    checkout (``BENCH_<NAME>_DATABASE_URL`` names another database), ``var/bench-<name>``,
    warnings only in the log; ``extra`` settings on top."""
    database = os.environ.get(
        f"BENCH_{name.upper()}_DATABASE_URL",
        f"postgres://postgres@127.0.0.1:5432/flywheel_bench_{name}_{CHECKOUT}",
    )
    return database, {
        "DJANGO_SETTINGS_MODULE": "flywheel.settings",
        "DATABASE_URL": database,
        "CACHE_URL": f"{REDIS}/3",
        "FLYWHEEL_CACHE_PREFIX": f"bench_{name}_{CHECKOUT}",
        "CELERY_BROKER_URL": f"{REDIS}/4",
        "FLYWHEEL_VAR_DIR": str(ROOT / "var" / f"bench-{name}"),
        "FLYWHEEL_LOG_LEVEL": "WARNING",
        **extra,
    }


def questions(*, exclude: frozenset[str] = frozenset()) -> list[str]:
    """Every labelled question the project keeps (several hundred, varied).

    ``exclude`` leaves out intents, e.g. the conversation ones, which need a
    session with history to be answered.
    """
    found: list[str] = []
    for path in sorted(DATA.glob("intent_*.jsonl")):
        rows = [json.loads(line) for line in path.read_text().splitlines() if line]
        found += [row["question"] for row in rows if row["intent"] not in exclude]
    return found


def percentile(values: Sequence[float], pct: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(pct / 100 * (len(ordered) - 1))))
    return ordered[index]


def summary(values: Sequence[float]) -> str:
    return (
        f"p50 {percentile(values, 50):.3f}  p90 {percentile(values, 90):.3f}  "
        f"p99 {percentile(values, 99):.3f}  mean {statistics.fmean(values):.3f}  (n={len(values)})"
    )


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_for(url: str, timeout: float = 60.0) -> None:
    import httpx

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if httpx.get(url, timeout=1).status_code < 500:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise RuntimeError(f"{url} did not come up in {timeout:.0f} s")


def start(
    args: list[str], env: dict[str, str] | None = None, cwd: Path = ROOT
) -> subprocess.Popen[bytes]:
    return subprocess.Popen(  # noqa: S603 - our own interpreter and modules
        [sys.executable, *args],
        cwd=cwd,
        env={**os.environ, **(env or {})},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def peak_rss_mb(pid: int) -> float:
    """Peak resident memory (VmHWM) of a process and its children, in MB."""
    total_kb = 0
    children = Path(f"/proc/{pid}/task/{pid}/children")
    pids = [pid, *(int(c) for c in children.read_text().split())] if children.exists() else [pid]
    for each in pids:
        for line in Path(f"/proc/{each}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                total_kb += int(line.split()[1])
    return total_kb / 1024


def manage(
    env: dict[str, str],
    *args: str,
    stdin: str | None = None,
    inherit: bool = True,
    cwd: Path = ROOT,
) -> str:
    """``manage.py ARGS`` of the checkout ``cwd`` with ``env`` over this process's
    environment (or, with ``inherit`` off, ``env`` alone); its stdout."""
    result = subprocess.run(  # noqa: S603
        [sys.executable, "manage.py", *args],
        cwd=cwd,
        env={**os.environ, **env} if inherit else env,
        input=stdin,
        capture_output=True,
        text=True,
        check=True,
    )
    return result.stdout.strip()


def recreate_database(url: str) -> None:
    """Drop and create the PostgreSQL database ``url`` names (a benchmark's own)."""
    import psycopg

    admin, name = url.rsplit("/", 1)
    with psycopg.connect(f"{admin}/postgres", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')


# --- Processes, read from /proc (Linux) ------------------------------------------
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def process_tree(pid: int) -> list[int]:
    """``pid`` and all its descendants that are alive (e.g. uvicorn and its workers)."""
    found, todo = [], [pid]
    while todo:
        each = todo.pop()
        if not Path(f"/proc/{each}").exists():
            continue
        found.append(each)
        for task in Path(f"/proc/{each}/task").glob("*/children"):
            with contextlib.suppress(OSError):
                todo += [int(child) for child in task.read_text().split()]
    return found


def cpu_seconds(pid: int) -> float | None:
    """CPU time (user + system, all threads) a live process has used; None if it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # Fields after the command name (which may hold spaces) in parentheses:
    # state is field 3, utime and stime are fields 14 and 15.
    fields = stat[stat.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def rss_mb(pids: Sequence[int]) -> float:
    """Resident memory (VmRSS) summed over the processes, in MB (the gone count 0)."""
    total_kb = 0
    for pid in pids:
        with contextlib.suppress(OSError):
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total_kb += int(line.split()[1])
    return total_kb / 1024

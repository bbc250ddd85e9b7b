"""Soak: `make run`'s zero-setup default kept under light traffic for a while.

Starts scripts/run.sh (web, Celery worker and beat) on a fresh var/ directory
of its own, with nothing configured (SQLite, file cache, the SQLite broker),
registers an instant stand-in Flowise (bench/standin.py) and waits until
beat's health check and discovery have made it routable. Then it asks
RATE questions a second for SECONDS and checks, every minute and at the end:

- the web process answers every question (200), and `make run` is still up;
- the worker and beat still work: the stand-in's health checks keep arriving
  (one every 30 s from beat, run by the worker);
- one decision is stored per question asked.

Prints the figures (answered, p50 / p99, decisions, health checks, restarts
of the worker or beat) and exits 1 on any failure.

    python scripts/soak.py [--seconds 900] [--rate 2]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import ROOT, free_port, manage, percentile, start
from bench.loadgen import HttpConnection

FLOW = "45caf39e-e0a3-490e-bca4-4b9fb16a7db2"  # the stand-in's first chatflow
HEALTH_EVERY = 30  # beat's schedule for health checks (seconds)
ROUTABLE_WITHIN = 240  # beat discovers every 60 s; the first run may also migrate


def zero_setup_env(var: Path, port: int) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DATABASE_", "CACHE_"))}
    for name in ("CELERY_BROKER_URL", "REDIS_URL", "FLYWHEEL_CACHE_PREFIX"):
        env.pop(name, None)
    env |= {
        "FLYWHEEL_VAR_DIR": str(var),
        "HOST": "127.0.0.1",
        "PORT": str(port),
        # The stand-in listens on loopback, which backends may not reach unless allowed.
        "FLYWHEEL_BACKEND_ALLOWED_NETWORKS": "127.0.0.0/8",
    }
    return env


class Database:
    """Counts read straight from the run's SQLite file."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def one(self, sql: str, *params: object) -> int:
        with sqlite3.connect(self.path, timeout=30) as conn:
            return int(conn.execute(sql, params).fetchone()[0])

    def decisions(self) -> int:
        return self.one("SELECT count(*) FROM analytics_routingdecision")

    def health_checks_since(self, seconds: float) -> int:
        since = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(time.time() - seconds))
        return self.one("SELECT count(*) FROM backends_healthcheck WHERE checked_at >= ?", since)


async def ask(port: int, key: str, question: str) -> tuple[int, float]:
    connection = await HttpConnection.open("127.0.0.1", port)
    try:
        started = time.perf_counter()
        status, _ = await connection.post(
            "/api/v1/query",
            {"question": question, "flow": FLOW},
            {"Authorization": f"Bearer {key}"},
        )
        return status, (time.perf_counter() - started) * 1000
    finally:
        connection.close()


async def until_routable(port: int, key: str) -> float:
    started = time.monotonic()
    while time.monotonic() - started < ROUTABLE_WITHIN:
        try:
            status, _ = await ask(port, key, "Are you there?")
        except OSError:
            status = 0
        if status == 200:
            return time.monotonic() - started
        await asyncio.sleep(2)
    raise SystemExit(f"FAIL: the stand-in was not routable within {ROUTABLE_WITHIN} s")


async def traffic(
    port: int, key: str, seconds: float, rate: float, db: Database
) -> tuple[int, list[str]]:
    """Ask ``rate`` questions a second for ``seconds``: how many, and the failures found."""
    failures: list[str] = []
    latencies: list[float] = []
    statuses: dict[int, int] = {}
    asked = 0
    started = time.monotonic()
    next_check = started + 60
    in_flight: set[asyncio.Task[tuple[int, float]]] = set()
    done: list[tuple[int, float]] = []

    def finished(task: asyncio.Task[tuple[int, float]]) -> None:
        in_flight.discard(task)
        done.append(task.result() if task.exception() is None else (0, 0.0))

    while time.monotonic() - started < seconds:
        task = asyncio.ensure_future(ask(port, key, f"Soak question {asked}"))
        task.add_done_callback(finished)
        in_flight.add(task)
        asked += 1
        await asyncio.sleep(1 / rate)
        if time.monotonic() >= next_check:
            next_check += 60
            recent = db.health_checks_since(HEALTH_EVERY * 3)
            minute = round((time.monotonic() - started) / 60)
            print(f"  minute {minute}: {asked} asked, {recent} health checks in the last 90 s")
            if recent == 0:
                failures.append(f"minute {minute}: no health check in 90 s (worker or beat down)")
    if in_flight:
        await asyncio.wait(in_flight, timeout=30)
    for status, latency in done:
        statuses[status] = statuses.get(status, 0) + 1
        if status == 200:
            latencies.append(latency)
    answered = statuses.get(200, 0)
    share = 100 * answered / asked
    print(f"  asked {asked}, answered {answered} ({share:.2f} %), by status {statuses}")
    if latencies:
        p50, p99 = percentile(latencies, 50), percentile(latencies, 99)
        print(f"  latency ms: p50 {p50:.1f}  p99 {p99:.1f}")
    if answered != asked:
        failures.append(f"{asked - answered} of {asked} questions were not answered")
    return asked, failures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=float(os.environ.get("SOAK_SECONDS", 900)))
    parser.add_argument("--rate", type=float, default=2.0, help="questions per second")
    options = parser.parse_args()

    (ROOT / "var").mkdir(exist_ok=True)
    var = Path(tempfile.mkdtemp(prefix="soak-", dir=ROOT / "var"))
    port, standin_port = free_port(), free_port()
    env = zero_setup_env(var, port)
    db = Database(var / "flywheel.sqlite3")
    log = (var / "run.log").open("w")

    manage(env, "migrate", "--noinput", "-v", "0", inherit=False)
    key = manage(env, "create_api_key", "--name", "soak", inherit=False)
    standin = start(["bench/standin.py", str(standin_port), "0"])
    manage(env, "add_backend", "--name", "standin", "--kind", "flowise",
           "--url", f"http://127.0.0.1:{standin_port}", inherit=False)  # fmt: skip
    run = subprocess.Popen(  # noqa: S603 - the project's own script
        [str(ROOT / "scripts/run.sh")],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=log,
        start_new_session=True,
    )
    failures: list[str] = []
    try:
        print(f"Soak: make run's default on port {port} for {options.seconds:.0f} s, "
              f"{options.rate:g} questions/s (logs: {var / 'run.log'})")  # fmt: skip
        waited = asyncio.run(until_routable(port, key))
        print(f"  routable after {waited:.0f} s (beat's health check and discovery)")
        time.sleep(3)  # the probes' decisions land behind their answers
        before = db.decisions()
        asked, found = asyncio.run(traffic(port, key, options.seconds, options.rate, db))
        failures += found
        if run.poll() is not None:
            failures.append(f"make run exited (status {run.returncode})")
        time.sleep(3)  # the last decisions land behind their answers
        stored = db.decisions() - before
        print(f"  decisions stored for them: {stored}")
        if stored != asked:
            failures.append(f"{asked} questions asked, {stored} decisions stored")
        restarts = (var / "run.log").read_text().count("restarting in")
        print(f"  worker / beat restarts: {restarts}")
    finally:
        os.killpg(run.pid, signal.SIGTERM)
        try:
            run.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(run.pid, signal.SIGKILL)
        standin.terminate()
        standin.wait(timeout=10)
        log.close()
    for failure in failures:
        print(f"FAIL: {failure}")
    if failures:
        print(f"The run's files are kept in {var}.")
    else:
        shutil.rmtree(var, ignore_errors=True)
        print("Soak passed.")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

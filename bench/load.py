"""Sustained load through a real Flywheel server, measured against the direct call.

Flywheel runs as in production: uvicorn with one worker per core (--workers),
PostgreSQL, Redis, the decision writer on. Its only backend is bench/standin.py,
a Flowise stand-in that answers at once, so what is measured is Flywheel's own
cost. One generator process (bench/loadgen.py, a lean keep-alive HTTP/1.1
client) keeps a fixed number of requests in flight (--concurrency, 32): each
of that many connections sends its next question as soon as the last is
answered. The same questions, in the same order, go either

- direct: straight to the stand-in's prediction API, or
- Flywheel: through POST /api/v1/query (with the bench key of bench/rest.py,
  whose per-key limit is counted on every request and never reached).

Two ways to run it, both after a warm-up of --warmup seconds of each:

    bench/load.py --seconds 60                 # `make load`: sustained
    bench/load.py --rounds 3 --round-seconds 10  # `make bench`: alternating

Sustained: a short direct round, one Flywheel phase of --seconds (with a
progress line every --report-every seconds), another direct round.
Alternating: --rounds pairs of a direct and a Flywheel round.

Each round prints answered requests per second (HTTP 200), p50/p99 latency,
the errors (any non-200 or failed request; any makes the exit status 1), the
ratio to the direct round before it, and the CPU time per answered request of
each group of processes, read as utime + stime from /proc/PID/stat before and
after the round:

    web       uvicorn's parent and its workers
    pg        PostgreSQL backends connected to the bench database (pg_stat_activity)
    pg-bg     the cluster's background processes (WAL writer, checkpointer...),
              shared with any other database in use on the machine
    redis     the Redis server process, shared likewise
    stand-in  the stand-in backend
    gen       this generator

Memory: the resident memory (VmRSS) summed over Flywheel's processes after the
warm-up and at the end, and the growth. The machine's load average is printed
at the start and the end: the figures only mean something on a quiet machine.

The summary gives Flywheel's rate and its ratio to the direct call, both
latencies and their difference, the CPU per routed question (web + pg + pg-bg
+ redis) and the memory growth, and whether the targets are met (at least
1,000 answered questions a second; memory growth under 10 %): a miss is
printed, not an error. Last, once the decision writers have drained, the
number of stored decisions must equal the number of questions Flywheel
answered (warm-up included), or the exit status is 1.

Needs PostgreSQL and Redis (scripts/ensure_services.py); uses its own
database (flywheel_bench_load_<checkout>, recreated on each run), Redis DBs 7
and 8 under its own key prefix, and var/bench-load.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import (
    CHECKOUT,
    ROOT,
    cpu_seconds,
    free_port,
    manage,
    percentile,
    process_tree,
    questions,
    recreate_database,
    rss_mb,
    start,
    wait_for,
)
from bench.loadgen import HttpConnection
from bench.rest import BENCH_KEY_LIMIT, SETUP, ask, serve
from bench.rest import ENV as REST_ENV

PG = os.environ.get(
    "BENCH_LOAD_DATABASE_URL",
    f"postgres://postgres@127.0.0.1:5432/flywheel_bench_load_{CHECKOUT}",
)
REDIS = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379")
VAR = ROOT / "var" / "bench-load"
ENV = {
    **REST_ENV,  # log level, allowed hosts, backends on loopback
    "DATABASE_URL": PG,
    "CACHE_URL": f"{REDIS}/7",
    "CELERY_BROKER_URL": f"{REDIS}/8",
    "FLYWHEEL_CACHE_PREFIX": f"bench_load_{CHECKOUT}",
    "FLYWHEEL_VAR_DIR": str(VAR),
}
TARGET_RATE = 1000.0  # answered questions per second
TARGET_GROWTH = 10.0  # % of resident memory, after the warm-up to the end
STUCK_SECONDS = 30.0  # a request unanswered this long after a round's end is an error
GROUPS = ("web", "pg", "pg-bg", "redis", "stand-in", "gen")
ROUTED = ("web", "pg", "pg-bg", "redis")  # what a routed question costs Flywheel's side
LOCAL_HOSTS = {"127.0.0.1", "localhost", "::1"}


# --- The load generator ----------------------------------------------------------


@dataclass(frozen=True)
class Target:
    """Where the generator sends each question, and how."""

    name: str
    port: int
    path: str
    payload: Callable[[str], dict[str, str]]
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class Load:
    """What the generator saw: latencies of the answered requests, and the errors."""

    seconds: float = 0.0
    latencies_ms: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


async def generate(
    target: Target,
    pool: list[str],
    concurrency: int,
    seconds: float,
    tick: Callable[[Load], None] | None = None,
    every: float = 10.0,
) -> Load:
    """Keep ``concurrency`` requests in flight for ``seconds``; ``tick`` every ``every`` s."""
    load = Load()
    connections = [await HttpConnection.open("127.0.0.1", target.port) for _ in range(concurrency)]
    started = time.perf_counter()
    deadline = started + seconds

    async def client(i: int) -> None:
        n = i
        while time.perf_counter() < deadline:
            question = pool[n % len(pool)]
            n += concurrency
            sent = time.perf_counter()
            try:
                status, body = await connections[i].post(
                    target.path, target.payload(question), target.headers
                )
            except (OSError, EOFError, ValueError, RuntimeError) as exc:
                load.errors.append(f"{type(exc).__name__}: {exc}")
                connections[i].close()
                try:
                    connections[i] = await HttpConnection.open("127.0.0.1", target.port)
                except OSError as reopen:
                    load.errors.append(f"reconnecting: {reopen}")
                    return
                continue
            if status == 200:
                load.latencies_ms.append((time.perf_counter() - sent) * 1000)
            else:
                load.errors.append(f"HTTP {status}: {body[:200]!r}")

    async def ticker(tick: Callable[[Load], None]) -> None:
        while True:
            await asyncio.sleep(every)
            tick(load)

    clients = [asyncio.create_task(client(i)) for i in range(concurrency)]
    ticking = asyncio.create_task(ticker(tick)) if tick else None
    _, stuck = await asyncio.wait(clients, timeout=seconds + STUCK_SECONDS)
    load.seconds = time.perf_counter() - started
    for task in [*stuck, *([ticking] if ticking else [])]:
        task.cancel()
    load.errors += [f"no answer {STUCK_SECONDS:.0f} s after the round's end"] * len(stuck)
    for connection in connections:
        connection.close()
    return load


# --- CPU time per process group, from /proc ---------------------------------------

Snapshot = dict[str, dict[int, float]]


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


def redis_pid(url: str) -> int | None:
    """The Redis server's process id, if it runs on this machine."""
    import redis

    if urlsplit(url).hostname not in LOCAL_HOSTS:
        return None
    client = redis.Redis.from_url(url)
    try:
        pid = int(client.info("server")["process_id"])
    finally:
        client.close()
    comm = Path(f"/proc/{pid}/comm")
    return pid if comm.exists() and comm.read_text().startswith("redis") else None


class Meter:
    """CPU time used by each group of processes between two snapshots."""

    def __init__(self, groups: dict[str, Callable[[], list[int]]]) -> None:
        self.groups = groups

    def snapshot(self) -> Snapshot:
        taken: Snapshot = {}
        for name, pids in self.groups.items():
            times = {pid: cpu_seconds(pid) for pid in pids()}
            taken[name] = {pid: t for pid, t in times.items() if t is not None}
        return taken

    @staticmethod
    def used_ms(before: Snapshot, after: Snapshot) -> dict[str, float | None]:
        """Milliseconds per group; None for a group with no process found.

        A process that appeared during the interval counts from 0 (its whole
        life was in it); one that ended during it is lost.
        """
        used: dict[str, float | None] = {}
        for name, now in after.items():
            then = before.get(name, {})
            if not now and not then:
                used[name] = None
                continue
            used[name] = 1000 * sum(t - then.get(pid, 0.0) for pid, t in now.items())
        return used


# --- Rounds ----------------------------------------------------------------------


@dataclass
class Round:
    target: str
    load: Load
    cpu_ms: dict[str, float | None]

    @property
    def answered(self) -> int:
        return len(self.load.latencies_ms)

    @property
    def rate(self) -> float:
        return self.answered / self.load.seconds if self.load.seconds else 0.0

    def per_request(self, group: str) -> float | None:
        used = self.cpu_ms.get(group)
        return None if used is None else used / max(1, self.answered)


def p(values: list[float], pct: float) -> float:
    return percentile(values, pct) if values else float("nan")


def cell(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def print_header() -> None:
    print(f"  {'':<58}CPU ms per answered request, from /proc")
    cpu = " ".join(f"{g:>8}" for g in GROUPS)
    print(f"  {'round':<12} {'answered/s':>10} {'p50 ms':>8} {'p99 ms':>8} {'errors':>6} ", end="")
    print(f"{'vs direct':>9}  {cpu}")


def print_round(label: str, result: Round, direct: Round | None) -> None:
    ratio = f"x{result.rate / direct.rate:.2f}" if direct and direct.rate else ""
    latencies = result.load.latencies_ms
    cpu = " ".join(f"{cell(result.per_request(g)):>8}" for g in GROUPS)
    print(
        f"  {label:<12} {result.rate:>10.0f} {p(latencies, 50):>8.2f} {p(latencies, 99):>8.2f}"
        f" {len(result.load.errors):>6} {ratio:>9}  {cpu}"
    )
    for error in sorted(set(result.load.errors))[:5]:
        print(f"    error: {error}")


def measure(
    target: Target,
    pool: list[str],
    args: argparse.Namespace,
    meter: Meter,
    seconds: float,
    tick: Callable[[Load], None] | None = None,
) -> Round:
    before = meter.snapshot()
    load = asyncio.run(generate(target, pool, args.concurrency, seconds, tick, args.report_every))
    return Round(target.name, load, Meter.used_ms(before, meter.snapshot()))


def progress(web: Callable[[], list[int]]) -> Callable[[Load], None]:
    """A tick that prints the rate and p99 since the last one, and Flywheel's memory now."""
    last_n, last_at = 0, time.perf_counter()

    def tick(load: Load) -> None:
        nonlocal last_n, last_at
        now, n = time.perf_counter(), len(load.latencies_ms)
        interval = load.latencies_ms[last_n:n]
        rate = (n - last_n) / (now - last_at)
        print(
            f"    {rate:6.0f} answered/s, p99 {p(interval, 99):.2f} ms, "
            f"errors so far {len(load.errors)}, RSS {rss_mb(web()):.0f} MB",
            flush=True,
        )
        last_n, last_at = n, now

    return tick


# --- Flywheel and its stand-in ----------------------------------------------------


@dataclass
class Stack:
    server: subprocess.Popen[bytes]
    standin: subprocess.Popen[bytes]
    port: int
    standin_port: int
    key: str


def prepare_database(standin_port: int) -> str:
    """A fresh bench database, migrated, with bench/rest.py's setup; the bench key."""
    recreate_database(PG)
    shutil.rmtree(VAR, ignore_errors=True)  # no spool from an earlier run to replay
    manage(ENV, "migrate", "--noinput", "-v", "0")
    # rest.py's setup; both of its backends are the one instant stand-in here,
    # and every question names "instant".
    setup = SETUP.format(instant=standin_port, slow=standin_port, limit=BENCH_KEY_LIMIT)
    return manage(ENV, "shell", stdin=setup).splitlines()[-2]


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
def flywheel(workers: int) -> Iterator[Stack]:
    """The stand-in and uvicorn serving Flywheel with ``workers`` workers."""
    standin_port, port = free_port(), free_port()
    key = prepare_database(standin_port)
    standin = start(["bench/standin.py", str(standin_port), "0"])
    server: subprocess.Popen[bytes] | None = None
    try:
        wait_for(f"http://127.0.0.1:{standin_port}/api/v1/ping")
        server = serve(port, workers, env=ENV)
        wait_for(f"http://127.0.0.1:{port}/healthz")
        wait_for_workers(server.pid, workers)
        yield Stack(server, standin, port, standin_port, key)
    finally:
        for process in (server, standin):
            if process is not None:
                stop(process)


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


# --- The run ---------------------------------------------------------------------


def parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--seconds", type=float, default=60, help="sustained Flywheel phase")
    parser.add_argument(
        "--rounds", type=int, default=0, help="alternating direct/Flywheel rounds instead"
    )
    parser.add_argument("--round-seconds", type=float, default=10)
    parser.add_argument("--direct-seconds", type=float, default=5, help="sustained: direct rounds")
    parser.add_argument("--warmup", type=float, default=5, help="seconds of each, first")
    parser.add_argument("--concurrency", type=int, default=32, help="requests in flight")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--report-every", type=float, default=10, help="sustained: progress")
    parser.add_argument("--drain-seconds", type=float, default=30, help="for the decisions")
    return parser.parse_args()


def loadavg() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def combined(rounds: list[Round], target: str) -> Round:
    """The rounds to one target as one: their answers over their time, their CPU summed."""
    chosen = [r for r in rounds if r.target == target]
    load = Load(
        seconds=sum(r.load.seconds for r in chosen),
        latencies_ms=[ms for r in chosen for ms in r.load.latencies_ms],
        errors=[e for r in chosen for e in r.load.errors],
    )
    cpu: dict[str, float | None] = {}
    for group in GROUPS:
        values = [r.cpu_ms[group] for r in chosen if r.cpu_ms.get(group) is not None]
        cpu[group] = sum(v for v in values if v is not None) if values else None
    return Round(target, load, cpu)


def print_summary(
    rounds: list[Round], rss_start: float, rss_end: float, workers: int, concurrency: int
) -> None:
    fw, direct = combined(rounds, "Flywheel"), combined(rounds, "direct")
    ratio = fw.rate / direct.rate if direct.rate else float("nan")
    growth = 100 * (rss_end - rss_start) / rss_start if rss_start else float("nan")
    print(f"Summary ({workers} uvicorn worker(s), {concurrency} requests in flight):")
    print(f"  Flywheel: {fw.rate:.0f} answered/s; direct: {direct.rate:.0f}/s; ratio {ratio:.2f}")
    for pct in (50, 99):
        a, b = p(fw.load.latencies_ms, pct), p(direct.load.latencies_ms, pct)
        print(f"  p{pct}: Flywheel {a:.2f} ms, direct {b:.2f} ms, difference {a - b:+.2f} ms")
    parts = {g: fw.per_request(g) for g in ROUTED}
    total = sum(v for v in parts.values() if v is not None)
    shown = " + ".join(f"{g} {cell(v)}" for g, v in parts.items())
    print(f"  CPU per routed question: {total:.3f} ms ({shown})")
    print(f"  Flywheel RSS: {rss_start:.0f} MB after warm-up, {rss_end:.0f} MB at the end", end="")
    print(f" ({growth:+.1f} %)")
    met = {True: "met", False: "NOT met"}
    print(f"  target >= {TARGET_RATE:,.0f} answered/s: {met[fw.rate >= TARGET_RATE]}")
    print(f"  target memory growth < {TARGET_GROWTH:.0f} %: {met[growth < TARGET_GROWTH]}")


def decisions_stored(pg: Postgres, expected: int, wait: float) -> int:
    """The decisions in the database, once they reach ``expected`` or ``wait`` s have passed."""
    deadline = time.monotonic() + wait
    while (count := pg.decisions()) < expected and time.monotonic() < deadline:
        time.sleep(0.5)
    return count


def plan(args: argparse.Namespace) -> list[tuple[str, float]]:
    """The measured rounds in order: (target, seconds)."""
    if args.rounds:
        return [(t, args.round_seconds) for _ in range(args.rounds) for t in ("direct", "Flywheel")]
    return [
        ("direct", args.direct_seconds),
        ("Flywheel", args.seconds),
        ("direct", args.direct_seconds),
    ]


def run(args: argparse.Namespace, stack: Stack, pg: Postgres) -> int:
    """Warm up, run the rounds, print them and the summary; the exit status."""
    pool = questions(exclude=frozenset({"summarize", "conversation-query"}))
    targets = {
        "direct": Target(
            "direct", stack.standin_port, "/api/v1/prediction/x", lambda q: {"question": q}
        ),
        "Flywheel": Target(
            "Flywheel",
            stack.port,
            "/api/v1/query",
            lambda q: ask(q, "instant"),
            {"Authorization": f"Bearer {stack.key}"},
        ),
    }
    redis = redis_pid(REDIS)

    def web() -> list[int]:
        return process_tree(stack.server.pid)

    meter = Meter(
        {
            "web": web,
            "pg": pg.backends,
            "pg-bg": pg.background,
            "redis": lambda: [redis] if redis else [],
            "stand-in": lambda: process_tree(stack.standin.pid),
            "gen": lambda: [os.getpid()],
        }
    )
    print(f"Flywheel: {args.workers} uvicorn worker(s), processes {web()}; redis pid {redis}")
    print(f"  pg: backends of {PG.rsplit('/', 1)[1]}; pg-bg: the cluster's background processes")
    print(f"Warm-up: {args.warmup:.0f} s of each")
    warmups = [measure(targets[t], pool, args, meter, args.warmup) for t in ("Flywheel", "direct")]
    web_pids, rss_start = sorted(web()), rss_mb(web())
    print(f"  Flywheel RSS after warm-up: {rss_start:.0f} MB")

    print_header()
    rounds: list[Round] = []
    last_direct: Round | None = None
    for index, (name, seconds) in enumerate(plan(args), 1):
        sustained = name == "Flywheel" and not args.rounds
        if sustained:
            print(f"  Flywheel, {seconds:.0f} s sustained; every {args.report_every:.0f} s:")
        tick = progress(web) if sustained else None
        result = measure(targets[name], pool, args, meter, seconds, tick)
        print_round(f"{index} {name}", result, last_direct if name == "Flywheel" else None)
        last_direct = result if name == "direct" else last_direct
        rounds.append(result)
    rss_end = rss_mb(web())
    print_summary(rounds, rss_start, rss_end, args.workers, args.concurrency)
    return verdict(args, rounds + warmups, pg, web_pids, sorted(web()))


def verdict(
    args: argparse.Namespace,
    everything: list[Round],
    pg: Postgres,
    web_pids: list[int],
    web_pids_end: list[int],
) -> int:
    """Errors, decisions stored against questions answered, workers replaced: 0 or 1."""
    failed = False
    errors = sum(len(r.load.errors) for r in everything)
    if errors:
        print(f"  FAILED: {errors} request(s) not answered with 200 (warm-up included)")
        failed = True
    if web_pids != web_pids_end:
        print(f"  FAILED: Flywheel's processes changed: {web_pids} -> {web_pids_end}")
        failed = True
    answered = sum(r.answered for r in everything if r.target == "Flywheel")
    stored = decisions_stored(pg, answered, args.drain_seconds)
    print(f"  decisions stored: {stored}; questions Flywheel answered: {answered}", end="")
    print(" (warm-up included)")
    if stored != answered:
        print("  FAILED: the stored decisions do not match the answered questions")
        failed = True
    return 1 if failed else 0


def main() -> int:
    args = parse()
    print(f"Load average at start: {loadavg()} (1, 5, 15 min; {os.cpu_count()} cores)")
    with flywheel(args.workers) as stack:
        pg = Postgres(PG)
        try:
            status = run(args, stack, pg)
        finally:
            pg.close()
    print(f"Load average at end: {loadavg()}")
    return status


if __name__ == "__main__":
    sys.exit(main())

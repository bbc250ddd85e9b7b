"""Sustained load through a real Flywheel server, measured against the direct call.

Flywheel runs as in production: uvicorn with one worker per core (--workers),
PostgreSQL, Redis, the decision writer on. Its backend for the rounds is
bench/standin.py, a Flowise stand-in that answers at once, so what is measured
is Flywheel's own cost. One generator process (bench/loadgen.py, a lean keep-alive HTTP/1.1
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

Before and after in one run: ``--before DIR`` serves a second Flywheel from
another checkout (``git worktree add /tmp/before <commit>``), on its own
database, cache prefix and var directory, beside this one and against the
same stand-in; its rounds ("before") come between the direct ones and this
checkout's, and the summary gives the ratio of their CPU per question.

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
1,000 answered questions a second; at most 0.8 ms of CPU per routed question;
memory growth under 10 %): a miss is printed, not an error. Last, once the
decision writers have drained, the number of stored decisions must equal the
number of questions Flywheel answered (warm-up and bursts included), or the
exit status is 1.

Burst (--burst, 500; 0 skips it): that many questions at once, each on a
connection opened beforehand, to a second stand-in that answers after 1 s:
directly, then through each Flywheel (naming its backend "slow"), twice each
(the first also opens Flywheel's connections to the stand-in). It prints the
wall times, the second burst's ratio to the direct one, and whether Flywheel
answered them all within 1.3 s.

Needs PostgreSQL and Redis (scripts/ensure_services.py); uses its own
database (flywheel_bench_load_<checkout>, recreated on each run; with
--before, also ..._before), Redis DBs 7 and 8 under its own key prefix, and
var/bench-load (var/bench-load-before).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
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
    rss_mb,
    start,
    wait_for,
)
from bench.loadgen import HttpConnection
from bench.rest import BENCH_KEY_LIMIT, SETUP, ask
from bench.rest import ENV as REST_ENV
from bench.serving import (
    LOCAL_HOSTS,
    Server,
    decisions_stored,
    fresh_database,
    loadavg,
    served,
    stop,
)

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
TARGET_CPU_MS = 0.8  # CPU per routed question (web + pg + pg-bg + redis)
BURST_DELAY = 1.0  # seconds the burst's stand-in takes to answer
BURST_TARGET = 1.3  # seconds for the whole burst
STUCK_SECONDS = 30.0  # a request unanswered this long after a round's end is an error
GROUPS = ("web", "pg", "pg-bg", "redis", "stand-in", "gen")
ROUTED = ("web", "pg", "pg-bg", "redis")  # what a routed question costs Flywheel's side


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
    servers: list[Server]  # "before" first, when there is one; "Flywheel" last
    standin: subprocess.Popen[bytes]
    standin_port: int
    slow: subprocess.Popen[bytes]
    slow_port: int


def before_env() -> dict[str, str]:
    """The --before checkout's own database, cache prefix and var directory."""
    return {
        **ENV,
        "DATABASE_URL": f"{PG}_before",
        "FLYWHEEL_CACHE_PREFIX": f"{ENV['FLYWHEEL_CACHE_PREFIX']}_before",
        "FLYWHEEL_VAR_DIR": f"{VAR}-before",
    }


def prepare_database(server: Server, standin_port: int, slow_port: int) -> str:
    """A fresh database for ``server``, migrated, with bench/rest.py's setup; the bench key."""
    fresh_database(server)
    # rest.py's setup: "instant" answers at once (every round's question names it),
    # "slow" after a second (the burst's).
    setup = SETUP.format(instant=standin_port, slow=slow_port, limit=BENCH_KEY_LIMIT)
    return manage(server.env, "shell", stdin=setup, cwd=server.checkout).splitlines()[-2]


@contextmanager
def flywheel(workers: int, before: Path | None) -> Iterator[Stack]:
    """The stand-ins and uvicorn serving Flywheel (and the --before checkout's)."""
    standin_port, slow_port = free_port(), free_port()
    servers = [Server("Flywheel", ROOT, ENV)]
    if before is not None:
        servers.insert(0, Server("before", before.resolve(), before_env()))
    for server in servers:
        server.key = prepare_database(server, standin_port, slow_port)
    standin = start(["bench/standin.py", str(standin_port), "0"])
    slow = start(["bench/standin.py", str(slow_port), str(BURST_DELAY)])
    with ExitStack() as stack:
        for process in (standin, slow):
            stack.callback(stop, process)  # last: after the servers
        wait_for(f"http://127.0.0.1:{standin_port}/api/v1/ping")
        wait_for(f"http://127.0.0.1:{slow_port}/api/v1/ping")
        for server in servers:
            stack.enter_context(served(server, workers))
        yield Stack(servers, standin, standin_port, slow, slow_port)


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
    parser.add_argument(
        "--burst", type=int, default=500, help="questions at once to a 1 s stand-in (0: none)"
    )
    parser.add_argument(
        "--before",
        type=Path,
        help="another checkout (say, a git worktree of an earlier commit) to measure too",
    )
    return parser.parse_args()


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


def routed_cpu(result: Round) -> tuple[float, str]:
    """CPU per routed question (web + pg + pg-bg + redis), and its parts as text."""
    parts = {g: result.per_request(g) for g in ROUTED}
    total = sum(v for v in parts.values() if v is not None)
    return total, " + ".join(f"{g} {cell(v)}" for g, v in parts.items())


def print_summary(
    rounds: list[Round], labels: list[str], rss: tuple[float, float], args: argparse.Namespace
) -> None:
    direct = combined(rounds, "direct")
    print(f"Summary ({args.workers} uvicorn worker(s), {args.concurrency} requests in flight):")
    cpu: dict[str, float] = {}
    for label in labels:
        fw = combined(rounds, label)
        ratio = fw.rate / direct.rate if direct.rate else float("nan")
        print(
            f"  {label}: {fw.rate:.0f} answered/s; direct: {direct.rate:.0f}/s; ratio {ratio:.2f}"
        )
        for pct in (50, 99):
            a, b = p(fw.load.latencies_ms, pct), p(direct.load.latencies_ms, pct)
            print(f"    p{pct}: {label} {a:.2f} ms, direct {b:.2f} ms, difference {a - b:+.2f} ms")
        cpu[label], shown = routed_cpu(fw)
        print(f"    CPU per routed question: {cpu[label]:.3f} ms ({shown})")
    if cpu.get("before"):
        print(
            f"  CPU per routed question, Flywheel / before: {cpu['Flywheel'] / cpu['before']:.2f}"
        )
    rss_start, rss_end = rss
    growth = 100 * (rss_end - rss_start) / rss_start if rss_start else float("nan")
    print(f"  Flywheel RSS: {rss_start:.0f} MB after warm-up, {rss_end:.0f} MB at the end", end="")
    print(f" ({growth:+.1f} %)")
    fw = combined(rounds, "Flywheel")
    met = {True: "met", False: "NOT met"}
    print(f"  target >= {TARGET_RATE:,.0f} answered/s: {met[fw.rate >= TARGET_RATE]}")
    print(f"  target CPU per routed question <= {TARGET_CPU_MS} ms: ", end="")
    print(met[cpu["Flywheel"] <= TARGET_CPU_MS])
    print(f"  target memory growth < {TARGET_GROWTH:.0f} %: {met[growth < TARGET_GROWTH]}")


# --- The burst ---------------------------------------------------------------------


async def burst(
    port: int, path: str, payload: dict[str, str], headers: dict[str, str], n: int
) -> tuple[float, int]:
    """``n`` questions sent at once, each on a connection opened beforehand: the wall
    time until the last answer, and how many were answered with 200."""
    connections = [await HttpConnection.open("127.0.0.1", port) for _ in range(n)]
    try:
        started = time.perf_counter()
        results = await asyncio.gather(
            *(c.post(path, payload, headers) for c in connections), return_exceptions=True
        )
        wall = time.perf_counter() - started
    finally:
        for connection in connections:
            connection.close()
    return wall, sum(isinstance(r, tuple) and r[0] == 200 for r in results)


def run_bursts(stack: Stack, n: int) -> list[str]:
    """Two bursts to each target (the first also opens Flywheel's connections to the
    stand-in; the second finds them pooled, as a running server would); the errors."""
    print(f"Burst: {n} questions at once to a stand-in that answers after {BURST_DELAY:g} s")
    targets: list[tuple[str, int, str, dict[str, str], dict[str, str]]] = [
        ("direct", stack.slow_port, "/api/v1/prediction/x", {}, {"question": "q"})
    ]
    targets += [
        (s.label, s.port, "/api/v1/query", {"Authorization": f"Bearer {s.key}"}, ask("q", "slow"))
        for s in stack.servers
    ]
    errors: list[str] = []
    second: dict[str, float] = {}
    for label, port, path, headers, payload in targets:
        walls = []
        for _ in range(2):
            wall, ok = asyncio.run(burst(port, path, payload, headers, n))
            walls.append(wall)
            if ok != n:
                errors.append(f"{label}: {n - ok} of {n} not answered with 200")
        second[label] = walls[1]
        ratio = f"; x{walls[1] / second['direct']:.2f} direct" if label != "direct" else ""
        print(f"  {label:<9} first {walls[0]:.2f} s, second {walls[1]:.2f} s{ratio}")
    met = {True: "met", False: "NOT met"}
    fw = second["Flywheel"]
    within = fw <= BURST_TARGET and not errors
    print(f"  target: all answered within {BURST_TARGET:g} s: {met[within]}")
    for error in errors:
        print(f"  FAILED: {error}")
    return errors


def plan(args: argparse.Namespace, labels: list[str]) -> list[tuple[str, float]]:
    """The measured rounds in order: (target, seconds)."""
    if args.rounds:
        return [(t, args.round_seconds) for _ in range(args.rounds) for t in ("direct", *labels)]
    sustained = [(label, args.seconds) for label in labels]
    return [("direct", args.direct_seconds), *sustained, ("direct", args.direct_seconds)]


def run(args: argparse.Namespace, stack: Stack) -> int:
    """Warm up, run the rounds, print them and the summary; the exit status."""
    pool = questions(exclude=frozenset({"summarize", "conversation-query"}))
    servers = {s.label: s for s in stack.servers}
    labels = list(servers)
    targets = {
        "direct": Target(
            "direct", stack.standin_port, "/api/v1/prediction/x", lambda q: {"question": q}
        ),
        **{
            s.label: Target(
                s.label,
                s.port,
                "/api/v1/query",
                lambda q: ask(q, "instant"),
                {"Authorization": f"Bearer {s.key}"},
            )
            for s in stack.servers
        },
    }
    redis = redis_pid(REDIS)

    def meter(server: Server) -> Meter:
        pg = server.pg
        if pg is None:
            raise RuntimeError(f"{server.label} has no database monitor")
        return Meter(
            {
                "web": server.web,
                "pg": pg.backends,
                "pg-bg": pg.background,
                "redis": lambda: [redis] if redis else [],
                "stand-in": lambda: process_tree(stack.standin.pid),
                "gen": lambda: [os.getpid()],
            }
        )

    meters = {label: meter(server) for label, server in servers.items()}
    meters["direct"] = meters["Flywheel"]
    flywheel = servers["Flywheel"]
    for server in stack.servers:
        print(
            f"{server.label}: {args.workers} uvicorn worker(s), from {server.checkout.name}/, ",
            end="",
        )
        print(f"processes {server.web()}; database {server.database.rsplit('/', 1)[1]}")
    print(f"  redis pid {redis}; pg-bg: the cluster's background processes")
    print(f"Warm-up: {args.warmup:.0f} s of each")
    warmups = [measure(targets[t], pool, args, meters[t], args.warmup) for t in (*labels, "direct")]
    web_pids, rss_start = sorted(flywheel.web()), rss_mb(flywheel.web())
    print(f"  Flywheel RSS after warm-up: {rss_start:.0f} MB")

    print_header()
    rounds: list[Round] = []
    last_direct: Round | None = None
    for index, (name, seconds) in enumerate(plan(args, labels), 1):
        sustained = name != "direct" and not args.rounds
        if sustained:
            print(f"  {name}, {seconds:.0f} s sustained; every {args.report_every:.0f} s:")
        tick = progress(servers[name].web) if sustained else None
        result = measure(targets[name], pool, args, meters[name], seconds, tick)
        print_round(f"{index} {name}", result, last_direct if name != "direct" else None)
        last_direct = result if name == "direct" else last_direct
        rounds.append(result)
    rss_end = rss_mb(flywheel.web())
    print_summary(rounds, labels, (rss_start, rss_end), args)
    failed = run_bursts(stack, args.burst) if args.burst else []
    status = verdict(args, stack, rounds + warmups, web_pids, sorted(flywheel.web()))
    return 1 if failed else status


def verdict(
    args: argparse.Namespace,
    stack: Stack,
    everything: list[Round],
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
    bursts = 2 * args.burst  # two bursts to each server, every question answered
    for server in stack.servers:
        if server.pg is None:
            continue
        answered = sum(r.answered for r in everything if r.target == server.label) + bursts
        stored = decisions_stored(server.pg, answered, args.drain_seconds)
        print(
            f"  {server.label}: decisions stored: {stored}; questions answered: {answered}", end=""
        )
        print(" (warm-up and bursts included)")
        if stored != answered:
            print("  FAILED: the stored decisions do not match the answered questions")
            failed = True
    return 1 if failed else 0


def main() -> int:
    args = parse()
    print(f"Load average at start: {loadavg()} (1, 5, 15 min; {os.cpu_count()} cores)")
    with flywheel(args.workers, args.before) as stack:
        status = run(args, stack)
    print(f"Load average at end: {loadavg()}")
    return status


if __name__ == "__main__":
    sys.exit(main())

"""The fault suite: Flywheel under failing backends and its own dependencies stopping.

Everything runs on loopback and is private to the run: a PostgreSQL cluster
(initdb in var/chaos-*, stopped and started by the suite), a Redis server
(killed and started again), two stand-in Flowise backends (bench/standin.py:
the primary, which can be told to fail, and the fallback) and Flywheel under
uvicorn. Each scenario is bounded in time and prints its figures: answered
share, p50 / p99, decisions against requests, recovery time. The suite exits 1
if any scenario misses what it must hold:

- faults: the primary fails 30 % of 2,000 questions by 500, by hanging and by
  malformed answers, then refuses connections (killed): every question is
  answered, one decision per question, one performance record per attempt;
- redis: Redis killed for 20 s and started again under load: every question
  answered, /readyz names the cache while it is down and recovers after;
- postgres: PostgreSQL stopped for 70 s and started again under load: every
  question answered (a key in use authenticates past the minute its cache
  entry used to live), every decision stored once it is back; 65 s in,
  /readyz answers 503 within 2 s and an unknown key 503 within 1 s; the
  last questions of the 5 s after its return take under 0.5 s each;
- kill: the web process SIGKILLed under load and started again: every answer
  it sent has its decision stored (the spool, replayed at start-up);
- disk: the decision spool on a 2 MB disk, filled, and the web SIGKILLed under
  load: every answer it sent has its decision; with PostgreSQL stopped too,
  every question is refused (503), none answered without a record (needs
  root, to mount the disk);
- stall: the decisions table locked for 15 s under load, the writer's memory set
  to 1 MB: every question answered, the writer's memory stays within it (the
  rest waits in the spool alone), every decision stored within 30 s of the
  lock's end and the spilled segments then deleted;
- healed: the primary fails, then heals: back in rotation within 60 s;
- drip (last: the healed primary is back in rotation): the primary answers
  200 and then a byte a second, for 400 questions: every question answered
  (each attempt cut at its deadline, measured), the primary tried at least
  once, and its breaker opens, so it is tried for fewer than a quarter.

    python scripts/chaos.py [--only NAME ...]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import ROOT, free_port, manage, percentile, wait_for
from bench.loadgen import HttpConnection

PG_BIN = Path("/usr/lib/postgresql")
CONCURRENCY = 8
FAULT_QUESTIONS = 2000
DRIP_QUESTIONS = 400
PG_OUTAGE_SECONDS = 70
STALL_SECONDS = 15
UNKNOWN_KEY = "fw_00000000_not-a-key-flywheel-has-ever-seen-0000000"
SETUP = """
from backends.models import Backend, BackendHealth
from chatflows.models import Flow
from flywheel.services import api_key_create, tenant_get_or_create_default
from routing.install import defaults_load
defaults_load()
# The primary's flow matches far better (ten keywords against one): at 30 % failures it
# stays first, so the fallback answers for it hundreds of times.
for name, port, keywords in (("primary", {primary}, 10), ("fallback", {fallback}, 1)):
    b = Backend.objects.create(name=name, kind="flowise",
                               base_url=f"http://127.0.0.1:{{port}}", timeout_seconds=1)
    BackendHealth.objects.create(backend=b, healthy=True)
    words = ["general"] + [f"topic-{{i}}" for i in range(keywords - 1)]
    Flow.objects.create(backend=b, external_id=f"{{name}}-flow", name="any", deployed=True,
                        intent_keywords=words)
print(api_key_create(tenant=tenant_get_or_create_default(), name="chaos", rate_limit="off")[1])
"""


def run(command: list[str], **kwargs: object) -> str:
    done = subprocess.run(command, check=True, capture_output=True, text=True, **kwargs)  # type: ignore[call-overload]  # noqa: S603
    return str(done.stdout).strip()


def as_postgres(command: list[str]) -> list[str]:
    """PostgreSQL refuses to run as root: run its tools as the postgres user then."""
    return ["runuser", "-u", "postgres", "--", *command] if os.geteuid() == 0 else command


class Postgres:
    """A private PostgreSQL cluster on a port of its own."""

    def __init__(self, root: Path) -> None:
        versions = sorted(PG_BIN.glob("*/bin/initdb"))
        if not versions:
            raise SystemExit("the fault suite needs PostgreSQL's server binaries (initdb)")
        self.bin = versions[-1].parent
        self.data, self.port = root / "pgdata", free_port()
        self.data.mkdir()
        if os.geteuid() == 0:
            shutil.chown(root, "postgres")
            shutil.chown(self.data, "postgres")
        run(as_postgres([str(self.bin / "initdb"), "-D", str(self.data), "-A", "trust",
                         "-U", "postgres", "--no-sync"]))  # fmt: skip
        self.url = f"postgres://postgres@127.0.0.1:{self.port}/flywheel"

    def start(self) -> None:
        options = f"-p {self.port} -k /tmp -c listen_addresses=127.0.0.1 -c fsync=off"
        run(as_postgres([str(self.bin / "pg_ctl"), "-D", str(self.data), "-o", options,
                         "-l", str(self.data / "log"), "-w", "start"]))  # fmt: skip

    def stop(self) -> None:
        run(as_postgres([str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", "fast",
                         "-w", "stop"]))  # fmt: skip

    def create(self) -> None:
        run(as_postgres([str(self.bin / "createdb"), "-h", "127.0.0.1", "-p", str(self.port),
                         "-U", "postgres", "flywheel"]))  # fmt: skip

    def count(self, sql: str) -> int:
        import psycopg

        with psycopg.connect(self.url, autocommit=True) as conn:
            row = conn.execute(sql).fetchone()
            return int(row[0]) if row else 0


class Redis:
    def __init__(self) -> None:
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.process = subprocess.Popen(  # noqa: S603
            [
                shutil.which("redis-server") or "redis-server",
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                import socket

                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("redis-server did not start")

    def kill(self) -> None:
        if self.process is not None:
            self.process.kill()
            self.process.wait()


class Standin:
    def __init__(self) -> None:
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.process = subprocess.Popen(  # noqa: S603
            [sys.executable, "bench/standin.py", str(self.port), "0"],
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        wait_for(f"http://127.0.0.1:{self.port}/api/v1/ping")

    def kill(self) -> None:
        if self.process is not None:
            self.process.kill()
            self.process.wait()

    def faults(self, fault: str, share: float = 0.0) -> None:
        async def send() -> None:
            connection = await HttpConnection.open("127.0.0.1", self.port)
            await connection.post("/_faults", {"fault": fault, "share": share})
            connection.close()

        asyncio.run(send())


class Web:
    """Flywheel under uvicorn (one process), with the run's environment."""

    def __init__(self, env: dict[str, str], log: Path) -> None:
        self.env, self.port, self.log = env, free_port(), log
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        with self.log.open("a") as log:
            self.process = subprocess.Popen(  # noqa: S603
                [
                    sys.executable,
                    "-m",
                    "uvicorn",
                    "flywheel.asgi:application",
                    "--port",
                    str(self.port),
                    "--lifespan",
                    "on",
                    "--log-level",
                    "warning",
                ],
                cwd=ROOT,
                env=self.env,
                stdout=log,
                stderr=log,
            )
        wait_for(f"http://127.0.0.1:{self.port}/healthz")

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(sig)
            self.process.wait(timeout=60)


@dataclass
class Load:
    """Questions asked by CONCURRENCY clients, one after another each."""

    port: int
    key: str
    statuses: dict[int, int] = field(default_factory=dict)
    latencies: list[float] = field(default_factory=list)
    answered_ids: list[str] = field(default_factory=list)
    asked: int = 0
    stop: bool = False

    async def client(self, limit: int | None) -> None:
        connection: HttpConnection | None = None
        headers = {"Authorization": f"Bearer {self.key}"}
        while not self.stop and (limit is None or self.asked < limit):
            self.asked += 1
            started = time.perf_counter()
            try:
                if connection is None:
                    connection = await HttpConnection.open("127.0.0.1", self.port)
                payload = {"question": f"chaos question {self.asked}", "intent": "general"}
                status, body = await asyncio.wait_for(
                    connection.post("/api/v1/query", payload, headers), 40
                )
            except (TimeoutError, OSError, asyncio.IncompleteReadError, ValueError):
                status, body = 0, b""  # no answer at all (the server is down)
                if connection is not None:
                    connection.close()
                connection = None
                await asyncio.sleep(0.05)
            self.statuses[status] = self.statuses.get(status, 0) + 1
            if status == 200:
                self.latencies.append((time.perf_counter() - started) * 1000)
                self.answered_ids.append(json.loads(body)["request_id"])
        if connection is not None:
            connection.close()

    async def run(self, limit: int | None = None) -> None:
        await asyncio.gather(*(self.client(limit) for _ in range(CONCURRENCY)))

    @property
    def answered(self) -> int:
        return self.statuses.get(200, 0)

    def figures(self) -> str:
        share = 100 * self.answered / max(self.asked, 1)
        text = f"asked {self.asked}, answered {self.answered} ({share:.2f} %)"
        if self.latencies:
            p50, p99 = percentile(self.latencies, 50), percentile(self.latencies, 99)
            text += f", p50 {p50:.0f} ms, p99 {p99:.0f} ms"
        others = {s: n for s, n in self.statuses.items() if s != 200}
        return text + (f", not answered by status {others}" if others else "")


class Suite:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.failures: list[str] = []
        self.pg = Postgres(root)
        self.redis = Redis()
        self.primary, self.fallback = Standin(), Standin()
        self.env = {
            **{k: v for k, v in os.environ.items() if not k.startswith(("DATABASE_", "CACHE_"))},
            "DATABASE_URL": self.pg.url,
            "CACHE_URL": f"redis://127.0.0.1:{self.redis.port}/1",
            "CELERY_BROKER_URL": f"redis://127.0.0.1:{self.redis.port}/2",
            "FLYWHEEL_VAR_DIR": str(root / "var"),
            "FLYWHEEL_CACHE_PREFIX": "chaos",
            "FLYWHEEL_BACKEND_ALLOWED_NETWORKS": "127.0.0.0/8",
            "FLYWHEEL_LOG_LEVEL": "WARNING",
            "FLYWHEEL_RATE_LIMIT": "off",
        }
        self.web = Web(self.env, root / "web.log")
        self.key = ""

    def manage(self, *args: str, stdin: str | None = None) -> str:
        return manage(self.env, *args, stdin=stdin, inherit=False)

    def setup(self) -> None:
        self.pg.start()
        self.pg.create()
        self.redis.start()
        self.primary.start()
        self.fallback.start()
        self.manage("migrate", "--noinput", "-v", "0")
        setup = SETUP.format(primary=self.primary.port, fallback=self.fallback.port)
        self.key = self.manage("shell", stdin=setup).splitlines()[-1]
        self.web.start()

    def teardown(self) -> None:
        self.web.stop()
        for part in (self.primary, self.fallback, self.redis):
            part.kill()
        with contextlib.suppress(subprocess.CalledProcessError):  # stopped already
            self.pg.stop()

    # --- what the database holds ---------------------------------------------------
    def decisions(self) -> int:
        return self.pg.count("SELECT count(*) FROM analytics_routingdecision")

    def fallbacks(self) -> int:
        return self.pg.count(
            "SELECT count(*) FROM analytics_routingdecision WHERE outcome = 'fallback'"
        )

    def records_and_attempts(self) -> tuple[int, int]:
        records = self.pg.count("SELECT count(*) FROM analytics_performancerecord")
        attempts = self.pg.count(
            "SELECT count(*) FROM analytics_routingdecision d, "
            "json_array_elements(d.fallback_chain) a "
            # An attempt as an array (routing.recording.compact: its error type 5th) or,
            # kept in the earlier shape, an object.
            "WHERE COALESCE(a->>4, a->>'error_type') IS DISTINCT FROM 'BudgetExceeded'"
        )
        return records, attempts

    def stored(self, request_ids: list[str]) -> int:
        if not request_ids:
            return 0
        ids = ",".join(f"'{r}'" for r in request_ids)  # UUIDs from our own answers
        return self.pg.count(
            f"SELECT count(*) FROM analytics_routingdecision WHERE request_id IN ({ids})"  # noqa: S608
        )

    def until(self, check: Callable[[], bool], timeout: float) -> float | None:
        """Seconds until ``check`` holds, or None if it did not within ``timeout``."""
        started = time.monotonic()
        while time.monotonic() - started < timeout:
            try:
                if check():
                    return round(time.monotonic() - started, 1)
            except Exception:  # noqa: S110 - not yet: the service is still coming back
                pass
            time.sleep(0.25)
        return None

    def expect(self, scenario: str, holds: bool, what: str) -> None:
        if not holds:
            self.failures.append(f"{scenario}: {what}")
            print(f"    FAIL: {what}")

    def load_during(self, seconds_before: float, fault: Callable[[], None], after: float) -> Load:
        """Load from before ``fault`` (which may block) until ``after`` seconds past it."""
        load = Load(self.web.port, self.key)

        async def scenario() -> None:
            running = asyncio.ensure_future(load.run())
            await asyncio.sleep(seconds_before)
            await asyncio.get_running_loop().run_in_executor(None, fault)
            await asyncio.sleep(after)
            load.stop = True
            await running

        asyncio.run(scenario())
        return load

    # --- scenarios --------------------------------------------------------------------
    def faults(self) -> None:
        for fault in os.environ.get("CHAOS_FAULTS", "500,hang,malformed,refused").split(","):
            decisions_before = self.decisions()
            fallbacks_before = self.fallbacks()
            records_before, attempts_before = self.records_and_attempts()
            self.close_primary_breaker()  # each fault meets a primary in rotation
            if fault == "refused":
                self.primary.kill()
            else:
                self.primary.faults(fault, 0.3)
            load = Load(self.web.port, self.key)
            started = time.monotonic()
            asyncio.run(load.run(FAULT_QUESTIONS))
            print(f"  primary {fault} ({time.monotonic() - started:.0f} s): {load.figures()}")
            time.sleep(1.5)  # decisions land behind their answers
            decisions = self.decisions() - decisions_before
            records, attempts = self.records_and_attempts()
            records, attempts = records - records_before, attempts - attempts_before
            fell_back = self.fallbacks() - fallbacks_before
            print(f"    decisions {decisions} for {load.asked} questions ({fell_back} by "
                  f"fallback); performance records {records} for {attempts} attempts")  # fmt: skip
            name = f"faults/{fault}"
            self.expect(name, load.answered == load.asked, "a question was not answered")
            self.expect(name, decisions == load.asked, "decisions != questions")
            self.expect(name, records == attempts, "performance records != attempts")
        self.primary.start()  # healthy again for what follows
        self.primary.faults("", 0)

    def drip(self) -> None:
        """The primary answers 200 and then a byte a second: each attempt is cut at its
        deadline (half the query's budget while a fallback waits), as the primary's
        failure, so the fallback answers in time and the primary's breaker opens."""
        decisions_before = self.decisions()
        records_before, attempts_before = self.records_and_attempts()
        self.close_primary_breaker()
        self.primary.faults("drip", 1.0)
        load = Load(self.web.port, self.key)
        started = time.monotonic()
        asyncio.run(load.run(DRIP_QUESTIONS))
        took = time.monotonic() - started
        time.sleep(1.5)  # decisions land behind their answers
        records, attempts = self.records_and_attempts()
        records, attempts = records - records_before, attempts - attempts_before
        tried = attempts - load.asked  # each question's answer is one attempt; the rest drip
        print(f"  primary drips a byte a second ({took:.0f} s): {load.figures()}")
        print(f"    decisions {self.decisions() - decisions_before} for {load.asked} "
              f"questions; the primary tried {tried} times; performance records "
              f"{records} for {attempts} attempts")  # fmt: skip
        self.expect("drip", load.answered == load.asked, "a question was not answered")
        self.expect("drip", records == attempts, "a cut attempt was not measured")
        self.expect("drip", tried >= 1, "the primary was never tried: no drip was met")
        self.expect("drip", tried < load.asked / 4, "the primary's breaker did not open")
        self.primary.faults("", 0)
        self.close_primary_breaker()

    def redis_outage(self) -> None:
        readiness: list[int] = []

        def outage() -> None:
            self.redis.kill()
            time.sleep(10)
            readiness.append(self.readyz_status())
            time.sleep(10)
            self.redis.start()

        load = self.load_during(3, outage, after=10)
        back = self.until(lambda: self.readyz_status() == 200, 30)
        print(f"  redis killed 20 s under load: {load.figures()}")
        print(f"    /readyz during the outage: {readiness}; ready again {back} s after")
        self.expect("redis", load.answered == load.asked, "a question was not answered")
        self.expect("redis", readiness == [503], "/readyz did not say the cache was down")
        self.expect("redis", back is not None, "/readyz did not recover")

    def close_primary_breaker(self) -> None:
        """Take the primary out of the cooldown the previous fault opened, as an operator
        would in the admin: the health row, then the published copy every process reads."""
        import psycopg
        import redis

        with psycopg.connect(self.pg.url, autocommit=True) as conn:
            conn.execute(
                "UPDATE backends_backendhealth SET cooldown_until = NULL, needs_trial = false"
            )
        redis.Redis(port=self.redis.port, db=1).delete("chaos:1:flywheel:snapshot:health")
        time.sleep(1.5)  # the web process's memo of the routing state lives a second

    def readyz_status(self) -> int:
        async def get() -> int:
            connection = await HttpConnection.open("127.0.0.1", self.web.port)
            status, _ = await connection.get("/readyz")
            connection.close()
            return status

        return asyncio.run(get())

    def postgres_outage(self) -> None:
        time.sleep(1.5)  # what the previous scenario answered lands first
        before = self.decisions()

        probes: dict[str, tuple[int, float]] = {}
        after: list[float] = []

        def outage() -> None:
            self.pg.stop()
            time.sleep(PG_OUTAGE_SECONDS - 5)  # past the minute a key's cache entry lived
            probes["readyz"] = self.timed(self.readyz_status)
            probes["unknown key"] = self.timed(lambda: self.ask(UNKNOWN_KEY)[0])
            time.sleep(5)
            self.pg.start()
            # The first questions after its return: normal latency within seconds.
            ends = time.monotonic() + 5
            while time.monotonic() < ends:
                status, seconds = self.timed(lambda: self.ask(self.key)[0])
                after.append(seconds if status == 200 else math.inf)

        load = self.load_during(3, outage, after=1)
        asked = load.asked + len(after)  # the questions asked right after it, too
        back = self.until(lambda: self.decisions() - before >= asked, 90)
        time.sleep(1.5)
        stored, theirs = self.decisions() - before, self.stored(load.answered_ids)
        slow = [s for s in after if s > 0.5]
        print(f"  postgres stopped {PG_OUTAGE_SECONDS} s under load: {load.figures()}")
        print(f"    decisions {stored} for {asked} questions ({theirs} of the answers "
              f"sent), all stored {back} s after it was back")  # fmt: skip
        print(f"    {PG_OUTAGE_SECONDS - 5} s in: " + ", ".join(
            f"{name} {status} in {seconds:.2f} s" for name, (status, seconds) in probes.items()
        ) + f"; after it: {len(after)} questions in 5 s, {len(slow)} over 0.5 s")  # fmt: skip
        self.expect("postgres", load.answered == load.asked, "a question was not answered")
        self.expect("postgres", stored == asked, "decisions != questions")
        self.expect("postgres", theirs == load.answered, "an answer sent has no decision")
        self.expect("postgres", back is not None and back < 30, "decisions stored late")
        readyz, unknown = probes["readyz"], probes["unknown key"]
        self.expect("postgres", readyz[0] == 503 and readyz[1] < 2, "/readyz slow or wrong")
        self.expect("postgres", unknown[0] == 503 and unknown[1] < 1, "an unknown key's 503 slow")
        self.expect("postgres", not [s for s in after[-10:] if s > 0.5], "slow after the return")

    def timed(self, call: Callable[[], int]) -> tuple[int, float]:
        started = time.monotonic()
        status = call()
        return status, time.monotonic() - started

    def ask(self, key: str) -> tuple[int, bytes]:
        async def post() -> tuple[int, bytes]:
            connection = await HttpConnection.open("127.0.0.1", self.web.port)
            try:
                payload = {"question": "chaos probe", "intent": "general"}
                return await connection.post(
                    "/api/v1/query", payload, {"Authorization": f"Bearer {key}"}
                )
            finally:
                connection.close()

        return asyncio.run(post())

    def web_killed(self) -> None:
        def kill() -> None:
            self.web.stop(signal.SIGKILL)
            self.web.start()

        load = self.load_during(5, kill, after=5)
        back = self.until(lambda: self.stored(load.answered_ids) == load.answered, 60)
        stored = self.stored(load.answered_ids)
        print(f"  web SIGKILLed and started again under load: {load.figures()}")
        print(f"    answers sent {load.answered}, their decisions stored {stored} "
              f"(all {back} s after the restart)")  # fmt: skip
        self.expect("kill", stored == load.answered, "an answer sent has no decision")

    def full_disk(self) -> None:
        """The spool on a 2 MB disk, filled: answers go out only once the database has
        their decisions; a SIGKILL loses none; with the database stopped too, questions
        are refused (503), never answered without a record."""
        disk = self.root / "spool-disk"
        disk.mkdir()
        mounted = subprocess.run(  # noqa: S603 - a tmpfs of our own, for this run
            ["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(disk)],  # noqa: S607
            capture_output=True,
            text=True,
            check=False,
        )
        if mounted.returncode != 0:
            self.expect("disk", False, f"could not mount a small disk: {mounted.stderr.strip()}")
            return
        try:
            self.web.stop()
            self.web.env = {**self.env, "FLYWHEEL_SPOOL_DIR": str(disk)}
            self.web.start()
            with (disk / "filler").open("wb") as filler, contextlib.suppress(OSError):
                while True:  # until the disk is full
                    filler.write(b"\0" * 65536)
                    filler.flush()

            def kill() -> None:
                self.web.stop(signal.SIGKILL)
                self.web.start()

            load = self.load_during(4, kill, after=4)
            time.sleep(1.5)
            stored = self.stored(load.answered_ids)
            print(f"  spool disk full, web SIGKILLed under load: {load.figures()}")
            print(f"    answers sent {load.answered}, their decisions stored {stored}")
            self.expect("disk", stored == load.answered, "an answer sent has no decision")

            self.pg.stop()
            try:
                refused = Load(self.web.port, self.key)
                asyncio.run(refused.run(40))
            finally:
                self.pg.start()
            time.sleep(1.5)
            print(f"    and the database stopped: {refused.figures()}")
            self.expect("disk", refused.answered == 0, "answered without a record")
            self.expect("disk", refused.statuses.get(503, 0) == refused.asked, "not 503")
        finally:
            self.web.stop()
            self.web.env = self.env
            subprocess.run(["umount", str(disk)], check=False)  # noqa: S603, S607
            self.web.start()

    def stall(self) -> None:
        """The decisions table locked under load: the writer holds at most its memory
        limit and spills the rest to the spool, reads it back once the lock ends."""
        import psycopg

        limit = 1024 * 1024
        memory: list[float] = []
        rss: dict[str, int] = {}

        def lock() -> None:
            rss["before"] = self.rss()
            with psycopg.connect(self.pg.url) as conn:
                conn.execute("LOCK TABLE analytics_routingdecision IN ACCESS EXCLUSIVE MODE")
                ends = time.monotonic() + STALL_SECONDS
                while time.monotonic() < ends:
                    memory.append(self.gauge("flywheel_decision_writer_memory_bytes"))
                    time.sleep(0.5)
                rss["locked"] = self.rss()
                conn.rollback()

        try:
            self.web.stop()
            self.web.env = {**self.env, "FLYWHEEL_WRITER_MEMORY_MB": "1"}
            self.web.start()
            load = self.load_during(3, lock, after=2)
            back = self.until(lambda: self.stored(load.answered_ids) == load.answered, 60)
            time.sleep(2.5)  # a segment is deleted within a second of its last commit
            rss["after"] = self.rss()
            left = list((self.root / "var" / "spool").glob("*/*.jsonl"))
        finally:
            self.web.stop()
            self.web.env = self.env
            self.web.start()
        stored = self.stored(load.answered_ids)
        print(f"  decisions locked {STALL_SECONDS} s under load: {load.figures()}")
        print(f"    writer memory at most {max(memory) / 1024:.0f} kB (limit {limit // 1024} "
              f"kB); answers sent {load.answered}, their decisions stored {stored} (all "
              f"{back} s after the lock); spool segments left {len(left)}")  # fmt: skip
        print("    web RSS " + ", ".join(f"{k} {v / 2**20:.0f} MB" for k, v in rss.items()))
        self.expect("stall", load.answered == load.asked, "a question was not answered")
        self.expect("stall", 0 < max(memory) <= limit, "the writer's memory passed its limit")
        self.expect("stall", stored == load.answered, "an answer sent has no decision")
        self.expect("stall", back is not None and back < 30, "decisions stored late")
        self.expect("stall", not left, "spilled segments were left behind")

    def rss(self) -> int:
        if self.web.process is None:
            return 0
        status = Path(f"/proc/{self.web.process.pid}/status").read_text()
        kib = next(line.split()[1] for line in status.splitlines() if line.startswith("VmRSS"))
        return int(kib) * 1024

    def gauge(self, name: str) -> float:
        async def get() -> bytes:
            connection = await HttpConnection.open("127.0.0.1", self.web.port)
            _, body = await connection.get("/metrics")
            connection.close()
            return body

        for line in asyncio.run(get()).decode().splitlines():
            if line.startswith(f"{name} ") or line.startswith(f"{name}{{"):
                return float(line.rsplit(" ", 1)[1])
        return math.nan

    def healed(self) -> None:
        self.primary.faults("500", 1.0)
        load = Load(self.web.port, self.key)
        asyncio.run(load.run(200))  # the primary fails; its breaker opens
        self.primary.faults("", 0)

        last: list[dict[str, object]] = []

        def primary_answers() -> bool:
            async def ask() -> dict[str, object]:
                connection = await HttpConnection.open("127.0.0.1", self.web.port)
                _, body = await connection.post(
                    "/api/v1/query",
                    {"question": "are you back?", "intent": "general"},
                    {"Authorization": f"Bearer {self.key}"},
                )
                connection.close()
                return dict(json.loads(body)["routing"])

            last[:] = [asyncio.run(ask())]
            return last[0]["backend"] == "primary"

        back = self.until(primary_answers, 90)
        print(f"  primary failing, then healed: back in rotation {back} s after it healed")
        if back is None and last:  # why routing still passes it by, in its own words
            print(json.dumps(last[0], indent=1)[:4000])
        self.expect("healed", back is not None and back <= 60 + 5, "not back within 60 s")


SCENARIOS = ("faults", "redis", "postgres", "kill", "disk", "stall", "healed", "drip")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", nargs="*", choices=SCENARIOS, default=list(SCENARIOS))
    parser.add_argument("--keep", action="store_true", help="keep the cluster's files")
    options = parser.parse_args()
    (ROOT / "var").mkdir(exist_ok=True)
    root = Path(tempfile.mkdtemp(prefix="chaos-", dir=ROOT / "var"))
    suite = Suite(root)
    print(f"Fault suite (files in {root})")
    try:
        suite.setup()
        steps = {
            "faults": suite.faults,
            "drip": suite.drip,
            "redis": suite.redis_outage,
            "postgres": suite.postgres_outage,
            "kill": suite.web_killed,
            "disk": suite.full_disk,
            "stall": suite.stall,
            "healed": suite.healed,
        }
        for name in SCENARIOS:
            if name in options.only:
                print(f"[{name}]")
                steps[name]()
    finally:
        suite.teardown()
    for failure in suite.failures:
        print(f"FAIL: {failure}")
    if suite.failures or options.keep:
        print(f"The run's files are kept in {root}.")
        return 1 if suite.failures else 0
    shutil.rmtree(root, ignore_errors=True)
    print("Fault suite passed.")
    return 0


if __name__ == "__main__":
    sys.exit(main())

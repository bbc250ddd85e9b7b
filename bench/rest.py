"""REST overhead and concurrency, against a real Flywheel server (uvicorn, PostgreSQL, Redis).

1. Overhead: each question goes straight to a stand-in backend that answers at
   once, then through POST /api/v1/query to the same stand-in; prints p50/p99
   of the per-question difference, and throughput with 16 concurrent clients.
2. Concurrency: 500 simultaneous queries to a stand-in that waits 1 s, twice
   (the first burst also opens the connections to the stand-in); prints the
   wall time and Flywheel's peak memory.

Both run against uvicorn with one worker, then with two (one per core here).
The bench key carries a per-key limit far above these rates, so the limiter
counts every request without refusing any.

3. Limiter cost: on one more server (one worker),
   the same questions alternate between that key and a key whose limit is
   off; prints both and the median of the paired differences (the cost of
   one Redis round trip). bench/ratelimit.py measures the check alone.

4. The OpenAI-compatible door's cost: on the same server, the same questions
   take turns between POST /api/v1/query, POST /v1/chat/completions and
   POST /v1/responses (all forced to the instant stand-in); prints each, and the
   median of each door's paired differences with the query's.

The client is bench/loadgen.py, so that the load generator's own CPU, on
the same cores, stays small.

Needs PostgreSQL and Redis (as `make test` does); uses the database
flywheel_bench, recreated on each run.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import (
    ROOT,
    free_port,
    manage,
    peak_rss_mb,
    questions,
    recreate_database,
    start,
    summary,
    wait_for,
)
from bench.loadgen import HttpConnection

# One process, then one per core of the machines this runs on.
WORKERS = (1, 2)

PG = os.environ.get("BENCH_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/flywheel_bench")
REDIS = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379")
ENV = {
    "DATABASE_URL": PG,
    "CACHE_URL": f"{REDIS}/3",
    "CELERY_BROKER_URL": f"{REDIS}/4",
    "FLYWHEEL_VAR_DIR": str(ROOT / "var" / "bench"),
    "FLYWHEEL_LOG_LEVEL": "WARNING",
    "DJANGO_ALLOWED_HOSTS": "127.0.0.1,localhost",
    # The stand-ins listen on loopback, which backends may not reach unless allowed.
    "FLYWHEEL_BACKEND_ALLOWED_NETWORKS": "127.0.0.0/8",
}
SETUP = """
from backends.models import Backend, BackendHealth
from chatflows.models import Flow
from flywheel.services import api_key_create, tenant_get_or_create_default
try:
    from routing.install import defaults_load
except ImportError:  # a checkout from before routing's rooms (bench/load.py --before)
    from routing.services import defaults_load
defaults_load()
for name, port in (("instant", {instant}), ("slow", {slow})):
    b = Backend.objects.create(name=name, kind="flowise", base_url=f"http://127.0.0.1:{{port}}")
    BackendHealth.objects.create(backend=b, healthy=True)
    Flow.objects.create(backend=b, external_id=f"{{name}}-flow", name="any", deployed=True,
                        is_generic=True, intent_keywords=["general"])
tenant = tenant_get_or_create_default()
print(api_key_create(tenant=tenant, name="bench", rate_limit="{limit}")[1])
print(api_key_create(tenant=tenant, name="bench, unlimited", rate_limit="off")[1])
"""
# Counted on every request, never reached: the throughput runs make ~100,000 a minute.
BENCH_KEY_LIMIT = "10000000/minute"


def expect_ok(status: int, body: bytes) -> None:
    if status != 200:
        raise RuntimeError(f"HTTP {status}: {body[:300]!r}")


def ask(question: str, backend: str) -> dict[str, str]:
    return {"question": question, "backend": backend}


async def overhead(port: int, standin_port: int, key: str) -> None:
    pool = questions(exclude=frozenset({"summarize", "conversation-query"}))[:400]
    headers = {"Authorization": f"Bearer {key}"}
    standin = await HttpConnection.open("127.0.0.1", standin_port)
    flywheel = await HttpConnection.open("127.0.0.1", port)

    async def direct(question: str) -> None:
        status, _ = await standin.post("/api/v1/prediction/x", {"question": question})
        expect_ok(status, b"")

    async def via(question: str) -> None:
        status, body = await flywheel.post("/api/v1/query", ask(question, "instant"), headers)
        expect_ok(status, body)

    for question in pool[:50]:  # warm both paths
        await direct(question)
        await via(question)
    direct_ms: list[float] = []
    via_ms: list[float] = []
    for question in pool:
        t0 = time.perf_counter()
        await direct(question)
        t1 = time.perf_counter()
        await via(question)
        t2 = time.perf_counter()
        direct_ms.append((t1 - t0) * 1000)
        via_ms.append((t2 - t1) * 1000)
    standin.close()
    flywheel.close()
    print(f"  direct to stand-in, ms:        {summary(direct_ms)}")
    print(f"  through /api/v1/query, ms:     {summary(via_ms)}")
    overhead_ms = [v - d for v, d in zip(via_ms, direct_ms, strict=True)]
    print(f"  overhead (via - direct), ms:   {summary(overhead_ms)}")


async def limiter_cost(port: int, key: str, unlimited_key: str) -> None:
    pool = questions(exclude=frozenset({"summarize", "conversation-query"}))[:400]
    flywheel = await HttpConnection.open("127.0.0.1", port)

    async def via(question: str, raw_key: str) -> float:
        started = time.perf_counter()
        headers = {"Authorization": f"Bearer {raw_key}"}
        status, body = await flywheel.post("/api/v1/query", ask(question, "instant"), headers)
        expect_ok(status, body)
        return (time.perf_counter() - started) * 1000

    for question in pool[:50]:
        await via(question, key)
        await via(question, unlimited_key)
    on_ms: list[float] = []
    off_ms: list[float] = []
    for question in pool * 2:  # in pairs, so that drift on the shared cores hits both alike
        on_ms.append(await via(question, key))
        off_ms.append(await via(question, unlimited_key))
    flywheel.close()
    print(f"  /api/v1/query, key limit on, ms:  {summary(on_ms)}")
    print(f"  /api/v1/query, key limit off, ms: {summary(off_ms)}")
    paired = statistics.median(on - off for on, off in zip(on_ms, off_ms, strict=True))
    print(f"  the limiter's cost (median of paired differences): {paired:.3f} ms")


async def dialect_cost(port: int, key: str) -> None:
    pool = questions(exclude=frozenset({"summarize", "conversation-query"}))[:400]
    flywheel = await HttpConnection.open("127.0.0.1", port)
    headers = {"Authorization": f"Bearer {key}"}

    async def timed(path: str, body: Mapping[str, object]) -> float:
        started = time.perf_counter()
        status, answer = await flywheel.post(path, body, headers)
        expect_ok(status, answer)
        return (time.perf_counter() - started) * 1000

    def chat(question: str) -> dict[str, object]:
        return {
            "model": "flywheel",
            "messages": [{"role": "user", "content": question}],
            "flywheel": {"backend": "instant"},
        }

    def response(question: str) -> dict[str, object]:
        return {"model": "flywheel", "input": question, "flywheel": {"backend": "instant"}}

    for question in pool[:50]:
        await timed("/api/v1/query", ask(question, "instant"))
        await timed("/v1/chat/completions", chat(question))
        await timed("/v1/responses", response(question))
    query_ms: list[float] = []
    chat_ms: list[float] = []
    response_ms: list[float] = []
    for question in pool * 2:  # in turns, so that drift on the shared cores hits all alike
        query_ms.append(await timed("/api/v1/query", ask(question, "instant")))
        chat_ms.append(await timed("/v1/chat/completions", chat(question)))
        response_ms.append(await timed("/v1/responses", response(question)))
    flywheel.close()
    print(f"  POST /api/v1/query, ms:          {summary(query_ms)}")
    print(f"  POST /v1/chat/completions, ms:   {summary(chat_ms)}")
    print(f"  POST /v1/responses, ms:          {summary(response_ms)}")
    for door, door_ms in (("chat", chat_ms), ("responses", response_ms)):
        paired = statistics.median(d - q for d, q in zip(door_ms, query_ms, strict=True))
        print(f"  the OpenAI {door} door's cost (median of paired differences): {paired:.3f} ms")


async def throughput(port: int, key: str, clients: int = 16, seconds: float = 5.0) -> None:
    pool = questions(exclude=frozenset({"summarize", "conversation-query"}))
    headers = {"Authorization": f"Bearer {key}"}
    connections = [await HttpConnection.open("127.0.0.1", port) for _ in range(clients)]
    done = 0
    deadline = time.perf_counter() + seconds

    async def worker(connection: HttpConnection, i: int) -> None:
        nonlocal done
        while time.perf_counter() < deadline:
            question = pool[(i * 31 + done) % len(pool)]
            status, body = await connection.post("/api/v1/query", ask(question, "instant"), headers)
            expect_ok(status, body)
            done += 1

    started = time.perf_counter()
    await asyncio.gather(*(worker(c, i) for i, c in enumerate(connections)))
    rate = done / (time.perf_counter() - started)
    for connection in connections:
        connection.close()
    print(f"  throughput, {clients} concurrent clients: {rate:.0f} queries/s")


async def concurrency(port: int, key: str, pid: int, label: str, n: int = 500) -> None:
    headers = {"Authorization": f"Bearer {key}"}
    # Connections are opened (and the server warmed) first: the figure is
    # about answering n questions at once, not about accepting n sockets.
    connections = [await HttpConnection.open("127.0.0.1", port) for _ in range(n)]
    await asyncio.gather(*(c.get("/healthz") for c in connections))
    started = time.perf_counter()
    results = await asyncio.gather(
        *(
            c.post("/api/v1/query", ask(f"question {i}", "slow"), headers)
            for i, c in enumerate(connections)
        )
    )
    wall = time.perf_counter() - started
    for connection in connections:
        connection.close()
    ok = sum(status == 200 for status, _ in results)
    print(f"  {n} simultaneous queries to a 1 s stand-in, {label}: wall {wall:.2f} s")
    print(f"    answered: {ok}/{n}")
    print(f"  Flywheel peak memory (VmHWM, all processes): {peak_rss_mb(pid):.0f} MB")


def serve(
    port: int, workers: int, env: dict[str, str] | None = None, cwd: Path = ROOT
) -> subprocess.Popen[bytes]:
    """uvicorn serving the Flywheel of the checkout ``cwd``."""
    return start(
        [
            "-m",
            "uvicorn",
            "flywheel.asgi:application",
            "--port",
            str(port),
            "--workers",
            str(workers),
            "--log-level",
            "warning",
            "--lifespan",
            "on",
            "--backlog",
            "2048",
        ],
        env={**ENV, **(env or {})},
        cwd=cwd,
    )


def main() -> None:
    recreate_database(PG)
    manage(ENV, "migrate", "--noinput", "-v", "0")
    instant_port, slow_port = free_port(), free_port()
    setup = SETUP.format(instant=instant_port, slow=slow_port, limit=BENCH_KEY_LIMIT)
    key, unlimited_key = manage(ENV, "shell", stdin=setup).splitlines()[-2:]
    standins = [
        start(["bench/standin.py", str(instant_port), "0"]),
        start(["bench/standin.py", str(slow_port), "1.0"]),
    ]
    try:
        wait_for(f"http://127.0.0.1:{instant_port}/api/v1/ping")
        wait_for(f"http://127.0.0.1:{slow_port}/api/v1/ping")
        for workers in WORKERS:
            port = free_port()
            server = serve(port, workers)
            try:
                wait_for(f"http://127.0.0.1:{port}/healthz")
                time.sleep(1)  # every worker up, not just the first
                print(f"Flywheel with {workers} uvicorn worker(s):")
                asyncio.run(overhead(port, instant_port, key))
                asyncio.run(throughput(port, key))
                # The first burst opens Flywheel's connections to the stand-in; the
                # second finds them pooled, as a server that has been running would.
                asyncio.run(concurrency(port, key, server.pid, "first burst"))
                asyncio.run(concurrency(port, key, server.pid, "second burst"))
            finally:
                server.terminate()
                server.wait(timeout=20)
        port = free_port()
        server = serve(port, 1)
        try:
            wait_for(f"http://127.0.0.1:{port}/healthz")
            print("Rate limiter, 1 uvicorn worker:")
            asyncio.run(limiter_cost(port, key, unlimited_key))
            print("OpenAI-compatible door, 1 uvicorn worker:")
            asyncio.run(dialect_cost(port, unlimited_key))
        finally:
            server.terminate()
            server.wait(timeout=20)
    finally:
        for standin in standins:
            standin.terminate()
            standin.wait(timeout=10)


if __name__ == "__main__":
    main()

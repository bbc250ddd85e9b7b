"""REST overhead and concurrency, against a real Flywheel server (uvicorn, PostgreSQL, Redis).

1. Overhead: each question goes straight to a stand-in backend that answers at
   once, then through POST /api/v1/query to the same stand-in; prints p50/p99
   of the per-question difference, and throughput with 16 concurrent clients.
2. Concurrency: 500 simultaneous queries to a stand-in that waits 1 s; prints
   the wall time and the Flywheel process's peak memory.

Needs PostgreSQL and Redis (as `make test` does); uses the database
flywheel_bench, recreated on each run.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import ROOT, free_port, peak_rss_mb, questions, start, summary, wait_for

PG = os.environ.get("BENCH_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/flywheel_bench")
REDIS = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379")
ENV = {
    "DATABASE_URL": PG,
    "CACHE_URL": f"{REDIS}/3",
    "CELERY_BROKER_URL": f"{REDIS}/4",
    "FLYWHEEL_VAR_DIR": str(ROOT / "var" / "bench"),
    "FLYWHEEL_LOG_LEVEL": "WARNING",
    "DJANGO_ALLOWED_HOSTS": "127.0.0.1,localhost",
}
SETUP = """
from backends.models import Backend, BackendHealth
from chatflows.models import Flow
from flywheel.services import api_key_create, tenant_get_or_create_default
from routing.services import defaults_load
defaults_load()
for name, port in (("instant", {instant}), ("slow", {slow})):
    b = Backend.objects.create(name=name, kind="flowise", base_url=f"http://127.0.0.1:{{port}}")
    BackendHealth.objects.create(backend=b, healthy=True)
    Flow.objects.create(backend=b, external_id=f"{{name}}-flow", name="any", deployed=True,
                        is_generic=True, intent_keywords=["general"])
print(api_key_create(tenant=tenant_get_or_create_default(), name="bench")[1])
"""


def ask(question: str, backend: str) -> dict[str, str]:
    return {"question": question, "backend": backend}


def manage(*args: str, stdin: str | None = None) -> str:
    result = subprocess.run(  # noqa: S603
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env={**os.environ, **ENV},
        input=stdin,
        capture_output=True,
        text=True,
        check=True,
    )
    return result.stdout.strip()


def recreate_database() -> None:
    import psycopg

    admin = PG.rsplit("/", 1)[0] + "/postgres"
    name = PG.rsplit("/", 1)[1]
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')


async def overhead(base: str, standin: str, key: str) -> None:
    pool = questions(exclude=frozenset({"summarize", "conversation-query"}))[:400]
    headers = {"Authorization": f"Bearer {key}"}
    async with httpx.AsyncClient(timeout=30) as client:
        for question in pool[:50]:  # warm both paths
            await client.post(f"{standin}/api/v1/prediction/x", json={"question": question})
            await client.post(
                f"{base}/api/v1/query",
                json={"question": question, "backend": "instant"},
                headers=headers,
            )
        direct: list[float] = []
        via: list[float] = []
        for question in pool:
            t0 = time.perf_counter()
            await client.post(f"{standin}/api/v1/prediction/x", json={"question": question})
            t1 = time.perf_counter()
            r = await client.post(
                f"{base}/api/v1/query",
                json={"question": question, "backend": "instant"},
                headers=headers,
            )
            t2 = time.perf_counter()
            r.raise_for_status()
            direct.append((t1 - t0) * 1000)
            via.append((t2 - t1) * 1000)
        print(f"direct to stand-in, ms:        {summary(direct)}")
        print(f"through /api/v1/query, ms:     {summary(via)}")
        overhead_ms = [v - d for v, d in zip(via, direct, strict=True)]
        print(f"overhead (via - direct), ms:   {summary(overhead_ms)}")

        done = 0
        deadline = time.perf_counter() + 5

        async def worker(i: int) -> None:
            nonlocal done
            while time.perf_counter() < deadline:
                q = pool[(i * 31 + done) % len(pool)]
                r = await client.post(
                    f"{base}/api/v1/query",
                    json={"question": q, "backend": "instant"},
                    headers=headers,
                )
                r.raise_for_status()
                done += 1

        started = time.perf_counter()
        await asyncio.gather(*(worker(i) for i in range(16)))
        rate = done / (time.perf_counter() - started)
        print(f"throughput, 16 concurrent clients: {rate:.0f} queries/s")


async def concurrency(base: str, key: str, pid: int) -> None:
    headers = {"Authorization": f"Bearer {key}"}
    limits = httpx.Limits(max_connections=600, max_keepalive_connections=600)
    async with httpx.AsyncClient(timeout=60, limits=limits) as client:
        # warm the connection pool and the server's state
        await asyncio.gather(*(client.get(f"{base}/healthz") for _ in range(500)))
        started = time.perf_counter()
        results = await asyncio.gather(
            *(
                client.post(
                    f"{base}/api/v1/query",
                    json={"question": f"q{i}", "backend": "slow"},
                    headers=headers,
                )
                for i in range(500)
            )
        )
        wall = time.perf_counter() - started
    ok = sum(r.status_code == 200 for r in results)
    print(f"500 simultaneous queries to a 1 s stand-in: wall {wall:.2f} s, {ok}/500 answered")
    print(f"Flywheel process peak memory (VmHWM): {peak_rss_mb(pid):.0f} MB")


def main() -> None:
    recreate_database()
    manage("migrate", "--noinput", "-v", "0")
    instant_port, slow_port, port = free_port(), free_port(), free_port()
    key = manage("shell", stdin=SETUP.format(instant=instant_port, slow=slow_port)).splitlines()[-1]
    servers = [
        start(["bench/standin.py", str(instant_port), "0"]),
        start(["bench/standin.py", str(slow_port), "1.0"]),
        start(
            [
                "-m",
                "uvicorn",
                "flywheel.asgi:application",
                "--port",
                str(port),
                "--log-level",
                "warning",
                "--lifespan",
                "off",
                "--backlog",
                "2048",
            ],
            env=ENV,
        ),
    ]
    try:
        base = f"http://127.0.0.1:{port}"
        standin = f"http://127.0.0.1:{instant_port}"
        wait_for(f"{base}/healthz")
        wait_for(f"{standin}/api/v1/ping")
        wait_for(f"http://127.0.0.1:{slow_port}/api/v1/ping")
        asyncio.run(overhead(base, standin, key))
        asyncio.run(concurrency(base, key, servers[2].pid))
    finally:
        for server in servers:
            server.terminate()
            server.wait(timeout=10)


if __name__ == "__main__":
    main()

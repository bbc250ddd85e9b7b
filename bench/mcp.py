"""The MCP door's cost: its extra latency over REST, and how fast `runmcp` starts.

1. Extra latency: the same questions, in turn, through REST POST /api/v1/query
   (uvicorn, one worker) and through MCP universal_query over streamable
   HTTP (`manage.py runmcp --transport streamable-http`, one process), both
   to a stand-in backend that answers at once. Both are sent with
   bench/loadgen.py's small client (the MCP call as one JSON-RPC POST, as a
   stateless server takes it), so the figure is the servers' difference;
   prints the median of the paired differences (target: under 5 ms). The
   SDK's own HTTP client is timed too: it adds its client-side work
   (JSON-RPC framing, validating the result against the outputSchema).
2. In-process: this process serves the MCP tools itself (the SDK's
   in-process client) and calls the service directly; prints the MCP layer's
   own cost (tools/call minus answer_question) and in-process MCP against REST.
   About half of that layer is the client's: profiled, the SDK client's
   jsonschema check of each result against the outputSchema took ~1.9 ms of
   ~4 ms a call, Flywheel's door and the SDK's server side ~0.3 ms.
3. Start-up: `manage.py runmcp` over stdio, from process start until the
   SDK's stdio client has the tool list (median of 5).

Needs PostgreSQL and Redis (as `make test` does); uses the database
flywheel_bench_mcp, recreated on each run.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

# Run as `python bench/mcp.py`, this folder comes first on sys.path, where this file's
# name would hide the MCP SDK from `import mcp`: the project's root takes its place.
_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
sys.path.insert(0, str(_HERE.parent))

from bench.common import (  # noqa: E402
    ROOT,
    free_port,
    manage,
    questions,
    recreate_database,
    start,
    summary,
    wait_for,
)
from bench.loadgen import HttpConnection  # noqa: E402

PG = os.environ.get(
    "BENCH_MCP_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/flywheel_bench_mcp"
)
REDIS = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379")
ENV = {
    "DATABASE_URL": PG,
    "CACHE_URL": f"{REDIS}/5",
    "CELERY_BROKER_URL": f"{REDIS}/6",
    "FLYWHEEL_VAR_DIR": str(ROOT / "var" / "bench_mcp"),
    "FLYWHEEL_LOG_LEVEL": "WARNING",
    "DJANGO_ALLOWED_HOSTS": "127.0.0.1,localhost",
    "FLYWHEEL_CACHE_PREFIX": "bench_mcp",
}
SETUP = """
from backends.models import BackendHealth
from backends.services import backend_create
from chatflows.models import Flow
from flywheel.services import api_key_create, tenant_get_or_create_default
from routing.install import defaults_load
defaults_load()
b = backend_create(name="instant", kind="flowise", base_url="http://127.0.0.1:{port}", trusted=True)
BackendHealth.objects.create(backend=b, healthy=True)
Flow.objects.create(backend=b, external_id="instant-flow", name="any", deployed=True,
                    is_generic=True, intent_keywords=["general"])
print(api_key_create(tenant=tenant_get_or_create_default(), name="bench", rate_limit="off")[1])
"""
ROUNDS = 300
WARM = 30
STARTS = 5


def expect_ok(status: int, body: bytes) -> None:
    if status != 200 or b'"isError":true' in body or b'"isError": true' in body:
        raise RuntimeError(f"HTTP {status}: {body[:300]!r}")


def paired(label: str, slower: Sequence[float], faster: Sequence[float]) -> None:
    differences = [s - f for s, f in zip(slower, faster, strict=True)]
    print(f"  {label}: median {statistics.median(differences):.3f} ms  ({summary(differences)})")


async def timed(fn: Callable[[], Awaitable[None]]) -> float:
    started = time.perf_counter()
    await fn()
    return (time.perf_counter() - started) * 1000


async def over_http(rest_port: int, mcp_port: int, key: str, pool: list[str]) -> None:
    """REST against MCP-over-HTTP, the same small client for both."""
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    auth = {"Authorization": f"Bearer {key}"}
    mcp_headers = {**auth, "Accept": "application/json, text/event-stream"}
    rest = await HttpConnection.open("127.0.0.1", rest_port)
    raw = await HttpConnection.open("127.0.0.1", mcp_port)
    counter = iter(range(1, 10**9))

    def rest_call(q: str) -> Callable[[], Awaitable[None]]:
        async def go() -> None:
            expect_ok(
                *await rest.post("/api/v1/query", {"question": q, "backend": "instant"}, auth)
            )

        return go

    def mcp_call(q: str) -> Callable[[], Awaitable[None]]:
        async def go() -> None:
            request = {
                "jsonrpc": "2.0",
                "id": next(counter),
                "method": "tools/call",
                "params": {
                    "name": "universal_query",
                    "arguments": {"question": q, "backend": "instant"},
                },
            }
            expect_ok(*await raw.post("/mcp", request, mcp_headers))

        return go

    async with (
        httpx2.AsyncClient(headers=auth, timeout=30) as http,
        Client(streamable_http_client(f"http://127.0.0.1:{mcp_port}/mcp", http_client=http)) as sdk,
    ):

        def sdk_call(q: str) -> Callable[[], Awaitable[None]]:
            async def go() -> None:
                result = await sdk.call_tool(
                    "universal_query", {"question": q, "backend": "instant"}
                )
                if result.is_error:
                    raise RuntimeError(result.content)

            return go

        for q in pool[:WARM]:
            for make in (rest_call, mcp_call, sdk_call):
                await make(q)()
        rest_ms: list[float] = []
        mcp_ms: list[float] = []
        sdk_ms: list[float] = []
        for q in pool:  # in turn, so that drift on shared cores hits all alike
            rest_ms.append(await timed(rest_call(q)))
            mcp_ms.append(await timed(mcp_call(q)))
            sdk_ms.append(await timed(sdk_call(q)))
    rest.close()
    raw.close()
    print(f"  REST POST /api/v1/query, ms:                {summary(rest_ms)}")
    print(f"  MCP tools/call over HTTP (same client), ms: {summary(mcp_ms)}")
    print(f"  MCP via the SDK's HTTP client, ms:          {summary(sdk_ms)}")
    paired("MCP over HTTP - REST (paired)", mcp_ms, rest_ms)
    paired("SDK client over HTTP - REST (paired)", sdk_ms, rest_ms)


async def in_process(rest_port: int, key: str, pool: list[str]) -> None:
    """This process as the MCP server: the SDK's in-process client, the bare service, REST."""
    from mcp import Client

    from agents.auth import KeyCaller
    from agents.server import build_server
    from flywheel.authentication import api_key_of_async
    from routing.answering.query_input import query_request
    from routing.answering.service import answer_question

    auth = {"Authorization": f"Bearer {key}"}
    rest = await HttpConnection.open("127.0.0.1", rest_port)
    tenant = (await api_key_of_async(key)).tenant

    async with Client(build_server(KeyCaller(key))) as client:

        def mcp_call(q: str) -> Callable[[], Awaitable[None]]:
            async def go() -> None:
                result = await client.call_tool(
                    "universal_query", {"question": q, "backend": "instant"}
                )
                if result.is_error:
                    raise RuntimeError(result.content)

            return go

        def direct_call(q: str) -> Callable[[], Awaitable[None]]:
            async def go() -> None:
                await answer_question(
                    query_request({"question": q, "backend": "instant"}), tenant=tenant
                )

            return go

        def rest_call(q: str) -> Callable[[], Awaitable[None]]:
            async def go() -> None:
                expect_ok(
                    *await rest.post("/api/v1/query", {"question": q, "backend": "instant"}, auth)
                )

            return go

        for q in pool[:WARM]:
            for make in (mcp_call, direct_call, rest_call):
                await make(q)()
        mcp_ms: list[float] = []
        direct_ms: list[float] = []
        rest_ms: list[float] = []
        for q in pool:
            mcp_ms.append(await timed(mcp_call(q)))
            direct_ms.append(await timed(direct_call(q)))
            rest_ms.append(await timed(rest_call(q)))
    rest.close()
    print(f"  answer_question called directly, ms:        {summary(direct_ms)}")
    print(f"  MCP in-process (SDK client), ms:            {summary(mcp_ms)}")
    paired("MCP in-process - the bare service (the MCP layer)", mcp_ms, direct_ms)
    paired("MCP in-process - REST over HTTP (paired)", mcp_ms, rest_ms)


async def stdio_startup(key: str) -> None:
    from mcp import Client, StdioServerParameters

    params = StdioServerParameters(
        command=sys.executable,
        args=["manage.py", "runmcp"],
        cwd=str(ROOT),
        env={**os.environ, **ENV, "FLYWHEEL_API_KEY": key, "PYTHONUNBUFFERED": "1"},
    )
    seconds: list[float] = []
    for _ in range(STARTS):
        started = time.perf_counter()
        async with Client(params, read_timeout_seconds=60) as client:
            tools = (await client.list_tools()).tools
            seconds.append(time.perf_counter() - started)
        if len(tools) < 10:
            raise RuntimeError(f"only {len(tools)} tools listed")
    print(
        f"  runmcp over stdio, start to tools listed: median {statistics.median(seconds):.2f} s "
        f"(min {min(seconds):.2f}, max {max(seconds):.2f}, n={len(seconds)})"
    )


def serve_rest(port: int) -> subprocess.Popen[bytes]:
    uvicorn = ["-m", "uvicorn", "flywheel.asgi:application", "--log-level", "warning"]
    return start([*uvicorn, "--port", str(port), "--lifespan", "on"], env=ENV)


def main() -> None:
    recreate_database(PG)
    manage(ENV, "migrate", "--noinput", "-v", "0")
    standin_port, rest_port, mcp_port = free_port(), free_port(), free_port()
    key = manage(ENV, "shell", stdin=SETUP.format(port=standin_port)).splitlines()[-1]
    os.environ.update(ENV)
    import django

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "flywheel.settings")
    django.setup()
    pool: list[Any] = questions(exclude=frozenset({"summarize", "conversation-query"}))[:ROUNDS]
    processes = [
        start(["bench/standin.py", str(standin_port), "0"]),
        serve_rest(rest_port),
        start(
            ["manage.py", "runmcp", "--transport", "streamable-http", "--port", str(mcp_port)], ENV
        ),
    ]
    try:
        wait_for(f"http://127.0.0.1:{standin_port}/api/v1/ping")
        wait_for(f"http://127.0.0.1:{rest_port}/healthz")
        wait_for(f"http://127.0.0.1:{mcp_port}/mcp")  # a 401 without a key: it is up
        print(f"MCP universal_query against REST /api/v1/query ({len(pool)} questions each):")
        asyncio.run(over_http(rest_port, mcp_port, key, pool))
        print("MCP served in this process:")
        asyncio.run(in_process(rest_port, key, pool))
        print("Start-up:")
        asyncio.run(stdio_startup(key))
    finally:
        for process in processes:
            process.terminate()
            process.wait(timeout=20)
        from routing.recording.writer import drain

        drain()


if __name__ == "__main__":
    main()

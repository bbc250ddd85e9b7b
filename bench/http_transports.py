"""The query path's backend call through each HTTP transport, measured in one run.

A routed question makes one call to its backend: POST a small JSON question
to Flowise's prediction API with a bearer key, read a small JSON answer. This
sends that call to the instant stand-in backend (bench/standin.py, its own
process) through:

- ``plain``: HttpClient over backends/http/plain.py (httptools, kept-alive
  HTTP/1.1): what the product uses for http:// backends;
- ``aiohttp``: HttpClient over backends/http/transport.py's AiohttpTransport
  (what TLS and streamed answers use);
- ``httpx``: HttpClient over httpx's own transport (httpcore);
- ``httpx-api/plain``: httpx.AsyncClient's interface (its request and response
  objects) over the plain transport: httpx's interface with the fastest
  transport beneath it;
- ``httpx-api``: httpx.AsyncClient alone, as the LLM and embeddings called out
  before they moved to the HTTP layer.

Rounds alternate the variants so that a busy minute falls on all of them.
Per variant it prints the medians over rounds of the client's CPU per request
(this process only: the stand-in runs apart) one at a time and 32 at once, and
of the latency one at a time; and each median's ratio to ``plain``.

Run: python bench/http_transports.py [--requests N] [--rounds R]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import httpx
from yarl import URL

from backends.errors import BackendError
from backends.http import HttpClient, Request, Response, TransportError
from backends.http.plain import PlainHttp
from backends.http.transport import AiohttpTransport
from bench.common import free_port, start, wait_for

PATH = "/api/v1/prediction/bench-flow"
KEY = "sk-bench-not-a-secret"
CONCURRENCY = 32
Call = Callable[[int], Awaitable[Any]]


class HttpxUnderClient:
    """HttpClient's transport interface carried by httpx (its own pool, httpcore)."""

    def __init__(self) -> None:
        self._client = httpx.AsyncClient()

    async def send(self, request: Request, *, stream: bool = False) -> Response:
        try:
            answer = await self._client.request(
                request.method,
                str(request.url),
                headers=dict(request.headers),
                content=request.body,
                timeout=httpx.Timeout(request.timeout, connect=request.connect_timeout),
            )
        except httpx.HTTPError as err:
            raise TransportError(type(err).__name__) from err
        return Response(answer.status_code, answer.headers, request.url, content=answer.content)

    async def aclose(self) -> None:
        await self._client.aclose()


class PlainUnderHttpx(httpx.AsyncBaseTransport):
    """httpx.AsyncClient's interface over the plain transport."""

    _left_to_plain = frozenset({"host", "content-length"})  # plain.py writes these itself

    def __init__(self) -> None:
        self._plain = PlainHttp()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        headers = {k: v for k, v in request.headers.items() if k not in self._left_to_plain}
        answer = await self._plain.send(
            Request(
                method=request.method,
                url=URL(str(request.url)),
                headers=headers,
                body=await request.aread() or None,
                timeout=60.0,
                connect_timeout=5.0,
            )
        )
        return httpx.Response(
            answer.status_code, headers=list(answer.headers.items()), content=answer.content
        )

    async def aclose(self) -> None:
        await self._plain.aclose()


def _body(i: int) -> dict[str, Any]:
    return {"question": f"What does question {i} ask?", "overrideConfig": {"sessionId": "s"}}


def _mapped(response: Response, backend: str) -> BackendError:
    return BackendError(f"HTTP {response.status_code}", backend=backend)


def through_client(base: str, transport: Any) -> tuple[Call, Callable[[], Awaitable[None]]]:
    client = HttpClient(
        base_url=base,
        backend_name="standin",
        error_mapper=_mapped,
        headers={"Authorization": f"Bearer {KEY}"},
        transport=transport,
    )

    async def call(i: int) -> Any:
        response = await client.request("POST", PATH, json=_body(i), retry=False)
        return response.json()

    return call, client.aclose


def through_httpx(
    base: str, transport: httpx.AsyncBaseTransport | None
) -> tuple[Call, Callable[[], Awaitable[None]]]:
    client = httpx.AsyncClient(
        base_url=base,
        headers={"Authorization": f"Bearer {KEY}"},
        timeout=httpx.Timeout(60.0, connect=5.0),
        transport=transport,
    )

    async def call(i: int) -> Any:
        response = await client.post(PATH, json=_body(i))
        response.raise_for_status()
        return response.json()

    return call, client.aclose


VARIANTS: dict[str, Callable[[str], tuple[Call, Callable[[], Awaitable[None]]]]] = {
    "plain": lambda base: through_client(base, PlainHttp()),
    "aiohttp": lambda base: through_client(base, AiohttpTransport()),
    "httpx": lambda base: through_client(base, HttpxUnderClient()),
    "httpx-api/plain": lambda base: through_httpx(base, PlainUnderHttpx()),
    "httpx-api": lambda base: through_httpx(base, None),
}


async def one_round(call: Call, n: int) -> tuple[float, float, float]:
    """(CPU µs per request one at a time, latency µs median, CPU µs per request 32 at once)."""
    for i in range(50):  # connections open, code paths warm
        await call(i)
    latencies = []
    cpu = time.process_time()
    for i in range(n):
        started = time.perf_counter()
        await call(i)
        latencies.append(time.perf_counter() - started)
    sequential = (time.process_time() - cpu) / n
    cpu = time.process_time()
    per_task = n // CONCURRENCY

    async def worker(w: int) -> None:
        for i in range(per_task):
            await call(w * per_task + i)

    await asyncio.gather(*(worker(w) for w in range(CONCURRENCY)))
    concurrent = (time.process_time() - cpu) / (per_task * CONCURRENCY)
    return sequential * 1e6, statistics.median(latencies) * 1e6, concurrent * 1e6


async def measure(base: str, n: int, rounds: int) -> dict[str, list[tuple[float, float, float]]]:
    results: dict[str, list[tuple[float, float, float]]] = {name: [] for name in VARIANTS}
    for _ in range(rounds):
        for name, build in VARIANTS.items():
            call, close = build(base)
            try:
                results[name].append(await one_round(call, n))
            finally:
                await close()
    return results


def report(results: dict[str, list[tuple[float, float, float]]], n: int, rounds: int) -> None:
    medians = {
        name: tuple(statistics.median(r[k] for r in rows) for k in range(3))
        for name, rows in results.items()
    }
    base = medians["plain"]
    print(f"HTTP transports, the query path's backend call: {n} requests x {rounds} rounds each")
    print(
        f"{'':<17}{'CPU/request, 1 at a time':>26}{'latency p50, 1 at a time':>27}"
        f"{f'CPU/request, {CONCURRENCY} at once':>27}"
    )
    for name, (cpu, latency, concurrent) in medians.items():
        cells = [
            f"{value:7.0f} µs (x{value / plain:4.2f})"
            for value, plain in zip((cpu, latency, concurrent), base, strict=True)
        ]
        print(f"{name:<17}{cells[0]:>26}{cells[1]:>27}{cells[2]:>27}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=2000, help="per variant and round")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    port = free_port()
    standin = start(["bench/standin.py", str(port), "0"])
    base = f"http://127.0.0.1:{port}"
    try:
        wait_for(f"{base}/api/v1/ping")
        results = asyncio.run(measure(base, args.requests, args.rounds))
    finally:
        standin.terminate()
        standin.wait()
    report(results, args.requests, args.rounds)


if __name__ == "__main__":
    main()

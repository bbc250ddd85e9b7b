"""The size bounds of backends/http/limits.py, on real sockets: what a server sends is
bounded while it is read, and a limit hit is a clear failure of that server.

Whole answers to http:// servers cross plain.py; streamed ones, and whole ones
when aiohttp is asked for, transport.py. The limits are made small here.
"""

from __future__ import annotations

import asyncio
import gzip
import json
from typing import Any

import httpx
import pytest

from backends.adapters.base import BackendConfig
from backends.adapters.flowise import FlowiseBackend
from backends.adapters.langflow import LangflowBackend
from backends.errors import BackendError, BackendUnexpectedError
from backends.http import HttpClient, NetworkTransport, Response, Transport
from backends.http.limits import PROBE_BYTES
from backends.http.transport import AiohttpTransport
from tests.backends.http.test_transport import _response, server
from tests.httpx_transport import HttpxTransport

LIMIT = 1000


def _client(url: str, transport: Transport) -> HttpClient:
    def map_error(response: Response, backend: str) -> BackendError:
        return BackendError(f"HTTP {response.status_code}", backend=backend)

    http = HttpClient(
        base_url=url, backend_name="local", error_mapper=map_error, transport=transport
    )
    http.document_bytes = LIMIT
    return http


def _sized(size: int, *, gzipped: bool = False, length: bool = True) -> Any:
    """A handler answering ``size`` bytes of JSON (gzipped, or without a length)."""

    async def handler(request: dict[str, Any], writer: asyncio.StreamWriter) -> None:
        body = json.dumps({"text": "x" * (size - 12)}).encode()
        if gzipped:
            body = gzip.compress(body)
        headers = {"Content-Type": "application/json"}
        if gzipped:
            headers["Content-Encoding"] = "gzip"
        if length:
            writer.write(_response(200, body, headers))
            return
        head = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
        writer.write(f"HTTP/1.1 200 OK\r\n{head}Transfer-Encoding: chunked\r\n\r\n".encode())
        for start in range(0, len(body), 100):
            part = body[start : start + 100]
            writer.write(f"{len(part):x}\r\n".encode() + part + b"\r\n")
        writer.write(b"0\r\n\r\n")

    return handler


def _whole(handler: Any, transport: Transport | None = None) -> Any:
    """POST once through a client with LIMIT-byte answers: the answer's JSON or the error."""

    async def run() -> Any:
        async with server(handler) as url:
            http = _client(url, transport or NetworkTransport())
            try:
                return (await http.request("POST", "/p", json={})).json()
            except BackendError as err:
                return err
            finally:
                await http.aclose()

    return asyncio.run(run())


@pytest.mark.parametrize("length", [True, False], ids=["content-length", "chunked"])
@pytest.mark.parametrize("transport", [NetworkTransport, AiohttpTransport])
def test_a_whole_answer_within_the_limit_arrives(length: bool, transport: type) -> None:
    assert _whole(_sized(LIMIT, length=length), transport()) == {"text": "x" * (LIMIT - 12)}


@pytest.mark.parametrize("length", [True, False], ids=["content-length", "chunked"])
@pytest.mark.parametrize("transport", [NetworkTransport, AiohttpTransport])
def test_a_whole_answer_past_the_limit_is_a_clear_failure(length: bool, transport: type) -> None:
    failed = _whole(_sized(LIMIT + 1, length=length), transport())

    assert isinstance(failed, BackendUnexpectedError)
    assert failed.details["failure"] == "too_large"
    assert failed.details["limit_bytes"] == LIMIT
    assert str(LIMIT) in failed.message


@pytest.mark.parametrize("transport", [NetworkTransport, AiohttpTransport])
def test_a_compressed_answer_is_bounded_by_what_it_inflates_to(transport: type) -> None:
    failed = _whole(_sized(50 * LIMIT, gzipped=True), transport())  # ~300 bytes on the wire

    assert isinstance(failed, BackendUnexpectedError)
    assert failed.details["failure"] == "too_large"


def test_headers_past_their_bound_are_a_clear_failure(monkeypatch: pytest.MonkeyPatch) -> None:
    from backends.http import plain

    monkeypatch.setattr(plain, "HEADER_BYTES", 200)

    async def big_headers(request: dict[str, Any], writer: asyncio.StreamWriter) -> None:
        writer.write(_response(200, b"{}", {f"X-Filler-{i}": "y" * 50 for i in range(10)}))

    failed = _whole(big_headers)

    assert isinstance(failed, BackendUnexpectedError)
    assert failed.details["failure"] == "too_large"


def test_a_connection_cut_at_the_limit_is_not_reused() -> None:
    connections: list[int] = []
    sizes = iter([LIMIT + 500, 10])

    async def handler(request: dict[str, Any], writer: asyncio.StreamWriter) -> None:
        await _sized(next(sizes))(request, writer)

    async def run() -> list[Any]:
        async with server(handler, connections) as url:
            http = _client(url, NetworkTransport())
            answers: list[Any] = []
            try:
                for _ in range(2):
                    try:
                        answers.append((await http.request("POST", "/p", json={})).json())
                    except BackendError as err:
                        answers.append(err)
            finally:
                await http.aclose()
        return answers

    first, second = asyncio.run(run())

    assert isinstance(first, BackendUnexpectedError)
    assert second == {"text": ""}
    assert len(connections) == 2


def test_a_streamed_answer_past_the_limit_fails_while_it_is_read() -> None:
    async def stream(request: dict[str, Any], writer: asyncio.StreamWriter) -> None:
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n")
        writer.write(b"Transfer-Encoding: chunked\r\n\r\n")
        for _ in range(30):  # 30 x 100 bytes, past the 1,000 allowed
            line = b"data: " + b"x" * 93 + b"\n"
            writer.write(b"%x\r\n%s\r\n" % (len(line), line))
            await writer.drain()
        writer.write(b"0\r\n\r\n")

    async def run() -> tuple[int, Any]:
        lines = 0
        async with server(stream) as url:
            http = _client(url, NetworkTransport())
            try:
                async with http.stream("POST", "/stream", json={}) as response:
                    async for _ in response.aiter_lines():
                        lines += 1
            except BackendError as err:
                return lines, err
            finally:
                await http.aclose()
        return lines, None

    lines, failed = asyncio.run(run())

    assert isinstance(failed, BackendUnexpectedError)
    assert failed.details["failure"] == "too_large"
    assert lines <= LIMIT // 100


def test_the_client_bounds_what_any_transport_brings() -> None:
    """The suite's httpx transport reads whole answers unbounded; the client still refuses
    one past the limit, so mocked backends fail as real ones do."""
    mocked = httpx.MockTransport(lambda request: httpx.Response(200, content=b"x" * (LIMIT + 1)))

    async def run() -> Any:
        http = _client("http://backend.test", HttpxTransport(mocked))
        try:
            await http.request("GET", "/x")
        except BackendError as err:
            return err
        finally:
            await http.aclose()

    failed = asyncio.run(run())

    assert isinstance(failed, BackendUnexpectedError)
    assert failed.details["failure"] == "too_large"


# --- every client path of the adapters is bounded, against a server that sends 100 MB ---------

HUNDRED_MB = 100 * 1024 * 1024
FLOWISE_TOKEN = b'message:\ndata:{"event":"token","data":"' + b"x" * 4000 + b'"}\n\n'
LANGFLOW_TOKEN = b'{"event": "token", "data": {"chunk": "' + b"x" * 4000 + b'", "id": "t"}}\n\n'


def _flood(content_type: str, unit: bytes, sent: list[int]) -> Any:
    """A handler answering 100 MB of ``unit``s (chunked), counting the bytes it got out;
    it stops when the reader goes away."""

    async def handler(request: dict[str, Any], writer: asyncio.StreamWriter) -> None:
        head = f"HTTP/1.1 200 OK\r\nContent-Type: {content_type}\r\nTransfer-Encoding: chunked\r\n"
        writer.write(head.encode() + b"\r\n")
        block = unit * max(1, 65536 // len(unit))
        written = 0
        try:
            while written < HUNDRED_MB and not writer.transport.is_closing():
                writer.write(f"{len(block):x}\r\n".encode() + block + b"\r\n")
                await writer.drain()
                written += len(block)
        finally:
            sent.append(written)
        writer.write(b"0\r\n\r\n")

    return handler


def _adapter(kind: str, url: str) -> Any:
    config = BackendConfig(id=7, name="flood", kind=kind, base_url=url, api_key="sk-x")
    # The product's own readers (the suite's default transport is built on httpx's mocks).
    kind_class = FlowiseBackend if kind == "flowise" else LangflowBackend
    return kind_class.build(config, transport=NetworkTransport())


async def _drain_stream(adapter: Any) -> None:
    async for _ in adapter.stream_flow("f1", "hi"):
        pass


PATHS = {
    # path: (what it calls, what the server floods it with, the limit that applies)
    "answer": (lambda a: a.execute_flow("f1", "hi"), "application/json", "answer"),
    "stream": (_drain_stream, "text/event-stream", "answer"),
    "discovery": (lambda a: a.discover_flows(), "application/json", "document"),
    "flow": (lambda a: a.get_flow("f1"), "application/json", "document"),
}


@pytest.mark.parametrize("kind", ["flowise", "langflow"])
@pytest.mark.parametrize("path", sorted(PATHS))
def test_every_path_stops_reading_a_flood_at_its_limit(
    kind: str, path: str, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    call, content_type, limit = PATHS[path]
    settings.MAX_ANSWER_BYTES = 200_000
    monkeypatch.setattr(HttpClient, "document_bytes", 300_000)
    expected = 200_000 if limit == "answer" else 300_000
    unit = {"flowise": FLOWISE_TOKEN, "langflow": LANGFLOW_TOKEN}[kind]
    sent: list[int] = []

    async def run() -> BaseException | None:
        async with server(_flood(content_type, unit, sent)) as url:
            adapter = _adapter(kind, url)
            try:
                await call(adapter)
            except BackendError as err:
                return err
            finally:
                await adapter.aclose()
        return None

    error = asyncio.run(run())

    assert isinstance(error, BackendUnexpectedError)
    assert (error.details["failure"], error.details["limit_bytes"]) == ("too_large", expected)
    assert "'flood'" in error.message
    assert str(expected) in error.message
    # The reader stopped: far less than the 100 MB was ever sent (socket buffers aside).
    assert sum(sent) < 20 * 1024 * 1024


@pytest.mark.parametrize("kind", ["flowise", "langflow"])
def test_a_health_probe_reads_no_more_than_a_probe_needs(
    kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    sent: list[int] = []

    async def run() -> Any:
        async with server(_flood("application/json", b"x" * 1000, sent)) as url:
            adapter = _adapter(kind, url)
            try:
                return await adapter.health_check()
            finally:
                await adapter.aclose()

    health = asyncio.run(run())

    assert not health.ok
    assert f"({PROBE_BYTES} bytes)" in health.error
    assert sum(sent) < 20 * 1024 * 1024

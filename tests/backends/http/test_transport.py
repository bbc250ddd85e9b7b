"""The product's transport under the backend clients, against real sockets on loopback.

Each test starts a small HTTP server in the test's own loop and talks to it
through HttpClient exactly as the adapters do, so what is checked is the
bytes on the wire and the errors a caller sees, not a mock. Whole requests
to these http:// servers cross backends/http/plain.py; streamed ones, aiohttp.
"""

from __future__ import annotations

import asyncio
import gzip
import json
import logging
import re
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import pytest
from django.test import override_settings
from yarl import URL

from backends.errors import BackendConnectionError, BackendError, BackendTimeoutError
from backends.http import HttpClient, NetworkTransport, Response

Handler = Callable[[dict[str, Any], asyncio.StreamWriter], Awaitable[None]]


async def _read_request(reader: asyncio.StreamReader) -> dict[str, Any]:
    head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1")
    request_line, *lines = head.strip().split("\r\n")
    method, target, _ = request_line.split(" ")
    headers = {k.strip().lower(): v.strip() for k, v in (line.split(":", 1) for line in lines)}
    body = await reader.readexactly(int(headers.get("content-length", 0)))
    return {"method": method, "target": target, "headers": headers, "body": body}


def _response(status: int, body: bytes, headers: dict[str, str] | None = None) -> bytes:
    lines = [f"HTTP/1.1 {status} X", f"Content-Length: {len(body)}"]
    lines += [f"{k}: {v}" for k, v in (headers or {}).items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


@asynccontextmanager
async def server(handler: Handler, connections: list[int] | None = None) -> AsyncIterator[str]:
    """Serve ``handler`` on loopback; ``connections`` gets a 1 per connection accepted."""

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if connections is not None:
            connections.append(1)
        try:
            while not reader.at_eof():
                await handler(await _read_request(reader), writer)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    listening = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = listening.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        listening.close()


def client(base_url: str, timeout: float = 5.0) -> HttpClient:
    def map_error(response: Response, backend: str) -> BackendError:
        return BackendError(f"HTTP {response.status_code}", backend=backend)

    return HttpClient(
        base_url=base_url,
        backend_name="local",
        error_mapper=map_error,
        headers={"Authorization": "Bearer sk-test"},
        timeout_seconds=timeout,
        transport=NetworkTransport(),
    )


def test_a_json_request_and_its_answer_cross_the_wire_intact() -> None:
    seen: list[dict[str, Any]] = []

    async def echo(request: dict[str, Any], writer: asyncio.StreamWriter) -> None:
        seen.append(request)
        body = json.dumps({"text": "Réponse", "got": json.loads(request["body"])}).encode()
        writer.write(_response(200, body, {"Content-Type": "application/json; charset=utf-8"}))

    async def run() -> Response:
        async with server(echo) as url:
            http = client(url)
            try:
                return await http.request(
                    "POST", "/api/v1/prediction/f1", json={"question": "¿qué?"}, params={"a": "1"}
                )
            finally:
                await http.aclose()

    response = asyncio.run(run())

    assert response.status_code == 200
    assert response.json() == {"text": "Réponse", "got": {"question": "¿qué?"}}
    (request,) = seen
    assert (request["method"], request["target"]) == ("POST", "/api/v1/prediction/f1?a=1")
    assert request["headers"]["authorization"] == "Bearer sk-test"
    assert request["headers"]["content-type"] == "application/json"
    assert json.loads(request["body"]) == {"question": "¿qué?"}


def test_a_compressed_answer_is_decoded_once() -> None:
    async def gzipped(request: dict[str, Any], writer: asyncio.StreamWriter) -> None:
        body = gzip.compress(json.dumps({"text": "small"}).encode())
        headers = {"Content-Type": "application/json", "Content-Encoding": "gzip"}
        writer.write(_response(200, body, headers))

    async def run() -> Any:
        async with server(gzipped) as url:
            http = client(url)
            try:
                return (await http.request("GET", "/x")).json()
            finally:
                await http.aclose()

    assert asyncio.run(run()) == {"text": "small"}


def test_a_streamed_answer_arrives_line_by_line_before_it_ends() -> None:
    second_line = asyncio.Event()

    async def stream(request: dict[str, Any], writer: asyncio.StreamWriter) -> None:
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n")
        writer.write(b"Transfer-Encoding: chunked\r\n\r\n")
        for line in (b"data: one\n", b"data: two\n"):
            writer.write(b"%x\r\n%s\r\n" % (len(line), line))
            await writer.drain()
            await second_line.wait()  # the client must see line one before line two is sent
        writer.write(b"0\r\n\r\n")

    async def run() -> list[str]:
        lines: list[str] = []
        async with server(stream) as url:
            http = client(url)
            try:
                async with http.stream("POST", "/stream", json={}) as response:
                    async for line in response.aiter_lines():
                        lines.append(line)
                        second_line.set()
            finally:
                await http.aclose()
        return lines

    assert asyncio.run(run()) == ["data: one", "data: two"]


def test_an_error_status_reaches_the_error_mapper() -> None:
    async def fail(request: dict[str, Any], writer: asyncio.StreamWriter) -> None:
        writer.write(_response(404, b'{"message": "no such flow"}'))

    async def run() -> None:
        async with server(fail) as url:
            http = client(url)
            try:
                await http.request("GET", "/api/v1/chatflows/x")
            finally:
                await http.aclose()

    with pytest.raises(BackendError, match="HTTP 404"):
        asyncio.run(run())


def _ping_a_closed_port() -> None:
    """GET /api/v1/ping on a port nothing listens on: raises what the client raises."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # nothing listens once the socket closes

    async def run() -> None:
        http = client(f"http://127.0.0.1:{port}")
        http.max_retries = 0
        try:
            await http.request("GET", "/api/v1/ping")
        finally:
            await http.aclose()

    asyncio.run(run())


def test_a_closed_port_is_a_connection_error() -> None:
    with pytest.raises(BackendConnectionError):
        _ping_a_closed_port()


def test_a_closed_port_is_logged_in_flywheels_words(caplog: pytest.LogCaptureFixture) -> None:
    """aiohttp says "Cannot connect to host ... ssl:default [Connect call failed ...]" of
    a plain http:// URL; the operator's log line says what happened instead."""
    with caplog.at_level(logging.INFO, logger="backends.http.client"), pytest.raises(BackendError):
        _ping_a_closed_port()

    port = re.search(r"cannot connect to 127\.0\.0\.1:(\d+)", caplog.text)
    assert port is not None, caplog.text
    assert f"failed: cannot connect to 127.0.0.1:{port[1]}: Connection refused" in caplog.text
    assert "ssl:default" not in caplog.text


def test_a_backend_that_stops_answering_is_a_timeout() -> None:
    async def hang(request: dict[str, Any], writer: asyncio.StreamWriter) -> None:
        await asyncio.sleep(5)

    async def run() -> None:
        async with server(hang) as url:
            http = client(url, timeout=0.2)
            try:
                await http.request("POST", "/api/v1/prediction/f1", json={})
            finally:
                await http.aclose()

    with pytest.raises(BackendTimeoutError):
        asyncio.run(run())


def test_a_connection_dropped_mid_answer_is_a_transport_error() -> None:
    async def drop(request: dict[str, Any], writer: asyncio.StreamWriter) -> None:
        writer.write(b'HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{"text": ')
        await writer.drain()
        writer.transport.abort()

    async def run() -> None:
        async with server(drop) as url:
            http = client(url)
            http.max_retries = 0
            try:
                await http.request("POST", "/api/v1/prediction/f1", json={})
            finally:
                await http.aclose()

    with pytest.raises(BackendConnectionError):
        asyncio.run(run())


def test_hundreds_of_requests_at_once_share_the_pool() -> None:
    async def slow_echo(request: dict[str, Any], writer: asyncio.StreamWriter) -> None:
        await asyncio.sleep(0.05)
        writer.write(_response(200, request["body"], {"Content-Type": "application/json"}))

    async def run() -> list[Any]:
        async with server(slow_echo) as url:
            http = client(url)
            try:
                responses = await asyncio.gather(
                    *(http.request("POST", "/p", json={"i": i}) for i in range(300))
                )
            finally:
                await http.aclose()
        return [r.json()["i"] for r in responses]

    assert asyncio.run(run()) == list(range(300))


def _lines_of(chunks: list[bytes], content_type: str = "text/event-stream") -> list[str]:
    async def arrive() -> AsyncIterator[bytes]:
        for chunk in chunks:
            yield chunk

    response = Response(200, {"content-type": content_type}, URL("http://x/"), chunks=arrive())

    async def read() -> list[str]:
        return [line async for line in response.aiter_lines()]

    return asyncio.run(read())


@pytest.mark.parametrize(
    "chunks",
    [
        [b"data: a\r\n\r\ndata: \xc3\xa9\r\n"],
        [b"data: a\r", b"\n\r", b"\ndata: \xc3", b"\xa9\r\n"],  # CRLF and UTF-8 cut in two
        [b"d", b"ata: a\r\n", b"\r\n", b"data: \xc3\xa9", b"\r\n"],
    ],
)
def test_lines_are_the_same_however_the_body_is_cut(chunks: list[bytes]) -> None:
    assert _lines_of(chunks) == ["data: a", "", "data: é"]


def test_lines_end_at_lf_cr_or_crlf_and_a_last_line_needs_no_end() -> None:
    assert _lines_of([b"one\ntwo\rthree\r\nfour"]) == ["one", "two", "three", "four"]


def test_a_declared_charset_decodes_the_text() -> None:
    response = Response(
        200,
        {"content-type": "text/plain; charset=ISO-8859-1"},
        URL("http://x/"),
        content=b"caf\xe9",
    )
    assert response.text == "café"


# --- the address guard of backends registered by tenants (backends/addresses.py) ---


def _count_requests() -> tuple[list[dict[str, Any]], Handler]:
    seen: list[dict[str, Any]] = []

    async def pong(request: dict[str, Any], writer: asyncio.StreamWriter) -> None:
        seen.append(request)
        writer.write(_response(200, b"pong", {"Content-Type": "text/plain"}))

    return seen, pong


def _get(url: str, *, restricted: bool) -> Response:
    async def run() -> Response:
        http = HttpClient(
            base_url=url,
            backend_name="local",
            error_mapper=lambda response, backend: BackendError("HTTP error", backend=backend),
            transport=NetworkTransport(restricted=restricted),
        )
        http.max_retries = 0
        try:
            return await http.request("GET", "/api/v1/ping")
        finally:
            await http.aclose()

    return asyncio.run(run())


def _on_loopback(host: str, *, restricted: bool) -> tuple[Any, list[dict[str, Any]]]:
    """GET through a server on 127.0.0.1, addressed as ``host``: the answer (or the
    error) and the requests the server saw."""
    seen, pong = _count_requests()

    async def run() -> Any:
        async with server(pong) as local:
            port = URL(local).port
            try:
                return await asyncio.to_thread(_get, f"http://{host}:{port}", restricted=restricted)
            except BackendError as err:
                return err

    return asyncio.run(run()), seen


@pytest.mark.parametrize("host", ["localhost", "127.0.0.1", "0x7f.0.0.1"])
def test_a_restricted_backend_is_refused_at_connect_time(host: str) -> None:
    """Whatever the URL said when it was saved, the address connected to is checked now:
    a name resolving to loopback (DNS rebinding) and literals are refused unsent."""
    refused, seen = _on_loopback(host, restricted=True)

    assert isinstance(refused, BackendConnectionError)
    assert refused.details["failure"] == "address"
    assert seen == []


@pytest.mark.parametrize("host", ["localhost", "127.0.0.1"])
def test_a_trusted_backend_and_an_allowed_network_reach_loopback(host: str) -> None:
    trusted, seen_trusted = _on_loopback(host, restricted=False)
    with override_settings(BACKEND_ALLOWED_NETWORKS=["127.0.0.0/8"]):
        allowed, seen_allowed = _on_loopback(host, restricted=True)

    assert isinstance(trusted, Response)
    assert isinstance(allowed, Response)
    assert trusted.text == allowed.text == "pong"
    assert (len(seen_trusted), len(seen_allowed)) == (1, 1)


@pytest.mark.parametrize(
    "url",
    [
        "http://[::1]:9",
        "http://[::ffff:127.0.0.1]:9",
        "http://[::]:9",
        "http://[fe80::1]:9",
        "http://127.1:9",
        "http://2130706433:9",
        "http://0177.0.0.1:9",
        "http://0.0.0.0:9",
        "http://169.254.169.254:9",
        "http://10.0.0.1:9",
    ],
)
def test_a_restricted_backend_never_connects_to_an_internal_literal(url: str) -> None:
    with pytest.raises(BackendConnectionError) as raised:
        _get(url, restricted=True)

    assert raised.value.details["failure"] == "address"


def test_a_closed_port_and_a_port_that_is_not_http_read_the_same() -> None:
    """aiohttp's words ("Connect call failed" vs "Server disconnected") would let a
    tenant scan ports: the caller sees Flywheel's one description instead."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        closed = sock.getsockname()[1]

    async def hang_up(request: dict[str, Any], writer: asyncio.StreamWriter) -> None:
        writer.transport.abort()

    async def run() -> list[BackendError]:
        errors = []
        async with server(hang_up) as open_url:
            for url in (f"http://127.0.0.1:{closed}", open_url):
                try:
                    await asyncio.to_thread(_get, url, restricted=False)
                except BackendError as err:
                    errors.append(err)
        return errors

    closed_error, open_error = asyncio.run(run())

    assert closed_error.message == open_error.message
    assert closed_error.details == open_error.details
    assert closed_error.message == "Backend 'local' could not be reached (the connection failed)."


def _ask_in_turn(handler: Handler, n: int, *, pause: float = 0.0) -> tuple[list[Any], int]:
    """``n`` requests one after the other through one client: the answers (or errors)
    and the connections the server accepted."""
    connections: list[int] = []

    async def run() -> list[Any]:
        answers: list[Any] = []
        async with server(handler, connections) as url:
            http = client(url, timeout=1.0)
            http.max_retries = 0
            try:
                for i in range(n):
                    try:
                        answers.append(await http.request("POST", "/p", json={"i": i}))
                    except BackendError as err:
                        answers.append(err)
                    await asyncio.sleep(pause)
            finally:
                await http.aclose()
        return answers

    return asyncio.run(run()), len(connections)


async def _echo(request: dict[str, Any], writer: asyncio.StreamWriter) -> None:
    writer.write(_response(200, request["body"], {"Content-Type": "application/json"}))


def test_requests_in_turn_share_one_kept_alive_connection() -> None:
    answers, connections = _ask_in_turn(_echo, 5)

    assert [a.json() for a in answers] == [{"i": i} for i in range(5)]
    assert connections == 1


def test_a_connection_the_server_closed_while_idle_is_replaced_unseen() -> None:
    """A server that closes every connection after its answer (as one whose keep-alive
    timeout passed would) costs a new connection per request, never an error."""

    async def once(request: dict[str, Any], writer: asyncio.StreamWriter) -> None:
        await _echo(request, writer)
        await writer.drain()
        writer.close()

    answers, connections = _ask_in_turn(once, 3, pause=0.05)

    assert [a.json() for a in answers] == [{"i": i} for i in range(3)]
    assert connections == 3


def test_an_answer_sent_in_chunks_or_until_the_connection_closes_is_read_whole() -> None:
    async def chunked(request: dict[str, Any], writer: asyncio.StreamWriter) -> None:
        body = request["body"]
        writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
        for part in (body[:3], body[3:]):
            writer.write(f"{len(part):x}\r\n".encode() + part + b"\r\n")
        writer.write(b"0\r\n\r\n")

    async def until_close(request: dict[str, Any], writer: asyncio.StreamWriter) -> None:
        writer.write(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n" + request["body"])
        await writer.drain()
        writer.close()

    chunked_answers, _ = _ask_in_turn(chunked, 2)
    closed_answers, connections = _ask_in_turn(until_close, 2)

    assert [a.json() for a in chunked_answers] == [{"i": 0}, {"i": 1}]
    assert [a.json() for a in closed_answers] == [{"i": 0}, {"i": 1}]
    assert connections == 2


def test_an_answer_that_came_too_late_is_not_taken_for_the_next_one() -> None:
    """The first request times out; its answer arrives afterwards on that connection.
    The second request must get its own answer, on another connection."""

    async def late_first(request: dict[str, Any], writer: asyncio.StreamWriter) -> None:
        if json.loads(request["body"])["i"] == 0:
            await asyncio.sleep(1.5)
        await _echo(request, writer)

    answers, connections = _ask_in_turn(late_first, 2)

    assert isinstance(answers[0], BackendTimeoutError)
    assert answers[1].json() == {"i": 1}
    assert connections == 2


def test_an_answer_that_keeps_coming_is_not_cut_by_the_timeout() -> None:
    """The timeout bounds each wait for more of the answer, not the whole answer: one
    that trickles in for longer than the timeout, a byte at a time, arrives whole."""

    async def trickle(request: dict[str, Any], writer: asyncio.StreamWriter) -> None:
        body = request["body"]
        writer.write(f"HTTP/1.1 200 OK\r\nContent-Length: {len(body)}\r\n\r\n".encode())
        for i in range(len(body)):
            await writer.drain()
            await asyncio.sleep(0.2)
            writer.write(body[i : i + 1])

    answers, _ = _ask_in_turn(trickle, 1)  # 1 s timeout; 8 bytes, 0.2 s apart: 1.6 s

    assert answers[0].json() == {"i": 0}


def test_bytes_nobody_asked_for_retire_the_connection() -> None:
    """A server that writes on an idle kept-alive connection (a 408 before closing it,
    say): the next request goes on a new connection and gets its own answer."""

    async def then_408(request: dict[str, Any], writer: asyncio.StreamWriter) -> None:
        await _echo(request, writer)
        await writer.drain()
        await asyncio.sleep(0.05)
        writer.write(_response(408, b""))

    answers, connections = _ask_in_turn(then_408, 2, pause=0.2)

    assert [a.json() for a in answers] == [{"i": 0}, {"i": 1}]
    assert connections == 2

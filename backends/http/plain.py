"""Whole requests over plain HTTP/1.1: the query path's calls to its backends.

A routed question makes one call to a backend, a small JSON request and a
small JSON answer, usually over http:// to a server nearby. Through aiohttp
that call cost the web process about 0.1 ms of CPU (its request and
response objects, timers, stream readers); here it is one protocol object
per connection, a pool of idle keep-alive connections per host and port,
and httptools (uvicorn's C parser) reading the answer. TLS and streamed
answers stay with aiohttp (transport.py, NetworkTransport).

What it does, as aiohttp did for these requests:

- ``request.timeout`` bounds the wait for a free connection and each wait
  for more of the answer; ``request.connect_timeout`` bounds connecting.
- An answer is read no further than ``request.max_bytes`` of body (and
  limits.HEADER_BYTES of headers): past them the connection is closed and the
  request fails (``too_large``).
- A gzip or deflate answer is decompressed (none is asked for), no further
  than ``request.max_bytes`` either.
- A restricted transport connects only to addresses backends/addresses.py
  allows: a literal is judged as written, a name on every address it
  resolves to, at connect time, and the connection goes to the judged address.
- Failures are TransportErrors in Flywheel's words, by kind (``connection``,
  ``dns``, ``blocked``, ``timeout``).

A connection idle for more than IDLE_SECONDS is closed, not reused: servers
close idle keep-alive connections after about 5 s (Express, uvicorn), and a
request sent as the server closes would fail. If a reused connection closes
before a byte of the answer arrives, the request goes once more on a new
connection: the server closed it idle, without reading the request.
"""

from __future__ import annotations

import asyncio
import errno
import os
import socket
import time
import zlib
from typing import TypeAlias

import httptools
from multidict import CIMultiDict, CIMultiDictProxy

from backends.addresses import spelled_allowed
from backends.http.limits import HEADER_BYTES, IDLE_SECONDS, MAX_CONNECTIONS
from backends.http.transport import (
    AiohttpTransport,
    Request,
    Response,
    TransportError,
    TransportTimeout,
    too_large,
)

Answer: TypeAlias = tuple[int, list[tuple[str, str]], bytes]  # status, headers, body


class _Closed(TransportError):
    """The connection ended before the answer did (``started``: after part of it came)."""

    def __init__(self, message: str, *, started: bool) -> None:
        super().__init__(message)
        self.started = started


class _Connection(asyncio.Protocol):
    """One keep-alive connection: one request at a time, its answer parsed as it arrives."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.idle_since = time.monotonic()
        self._parser = httptools.HttpResponseParser(self)
        self._answer: asyncio.Future[None] | None = None
        self._headers: list[tuple[str, str]] = []
        self._body: list[bytes] = []
        self._received = 0  # bytes of the current answer so far
        self._head_bytes = 0
        self._body_bytes = 0
        self._max_bytes = 0
        self._last_read = 0.0
        self._headers_done = False
        self._keep_alive = False
        self._status = 0
        self._timer: asyncio.TimerHandle | None = None

    # asyncio.Protocol
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        if self._answer is None:  # nothing asked (a 408 on an idle connection, say)
            self.close()
            return
        self._received += len(data)
        self._last_read = time.monotonic()
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserError as err:
            self._fail(_Closed(f"the answer is not HTTP: {err}", started=True))
            self.close()
        if self._head_bytes > HEADER_BYTES or self._body_bytes > self._max_bytes:
            self.close()  # failed as it crossed the limit; the rest is not read

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self._answer is None or self._answer.done():
            return
        if exc is None and self._headers_done and self._until_close():
            self._answer.set_result(None)  # a body without a length ends with the connection
            return
        reason = f": {exc}" if exc else ""
        closed = f"the server closed the connection{reason}"
        self._fail(_Closed(closed, started=bool(self._received)))

    def _until_close(self) -> bool:
        names = {name.lower() for name, _ in self._headers}
        return "content-length" not in names and "transfer-encoding" not in names

    # httptools callbacks
    def on_header(self, name: bytes, value: bytes) -> None:
        self._head_bytes += len(name) + len(value)
        if self._head_bytes > HEADER_BYTES:
            self._fail(
                TransportError(f"the answer's headers pass {HEADER_BYTES} bytes", "too_large")
            )
            return
        self._headers.append((name.decode("latin-1"), value.decode("latin-1")))

    def on_headers_complete(self) -> None:
        self._headers_done = True
        self._status = self._parser.get_status_code()

    def on_body(self, body: bytes) -> None:
        self._body_bytes += len(body)
        if self._body_bytes > self._max_bytes:
            self._fail(too_large(self._max_bytes))
            return
        self._body.append(body)

    def on_message_complete(self) -> None:
        self._keep_alive = self._parser.should_keep_alive()  # read now: the parser resets
        if self._answer is not None and not self._answer.done():
            self._answer.set_result(None)

    def _fail(self, err: Exception) -> None:
        if self._answer is not None and not self._answer.done():
            self._answer.set_exception(err)

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()

    async def exchange(
        self, head: bytes, body: bytes | None, timeout: float, max_bytes: int
    ) -> Answer:
        """Send one request; its status, headers and body (at most ``max_bytes``).
        Raises TransportError."""
        if self.transport is None or self.closed:
            raise _Closed("the connection is closed", started=False)
        loop = asyncio.get_running_loop()
        self._answer = answer = loop.create_future()
        self._headers, self._body, self._received = [], [], 0
        self._head_bytes = self._body_bytes = 0
        self._max_bytes = max_bytes
        self._headers_done = self._keep_alive = False
        self._last_read = time.monotonic()
        self.transport.write(head + body if body else head)
        self._timer = loop.call_later(timeout, self._check_idle, timeout)
        try:
            await answer
        finally:
            if self._timer is not None:
                self._timer.cancel()
            self._timer = None
            self._answer = None
        if not self._keep_alive:
            self.close()
        self.idle_since = time.monotonic()
        return self._status, self._headers, b"".join(self._body)

    def _check_idle(self, timeout: float) -> None:
        """The answer's timer: fail if nothing came for ``timeout`` s, else wait on."""
        if self._answer is None or self._answer.done():
            return
        quiet = time.monotonic() - self._last_read
        if quiet >= timeout:
            self._fail(TransportTimeout(f"no answer within {timeout:g} s"))
            self.close()  # the rest of this answer must not be read as the next one's
        else:
            loop = asyncio.get_running_loop()
            self._timer = loop.call_later(timeout - quiet, self._check_idle, timeout)


def _head(request: Request, host: str) -> bytes:
    """The request line and headers."""
    url = request.url
    authority = f"[{host}]" if ":" in host else host
    if url.explicit_port is not None and url.explicit_port != 80:
        authority = f"{authority}:{url.explicit_port}"
    lines = [f"{request.method} {url.raw_path_qs or '/'} HTTP/1.1", f"Host: {authority}"]
    lines += [f"{name}: {value}" for name, value in request.headers.items()]
    if request.body is not None or request.method in {"POST", "PUT", "PATCH"}:
        lines.append(f"Content-Length: {len(request.body or b'')}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def _inflate(body: bytes, wbits: int, limit: int) -> bytes:
    """``body`` decompressed, no further than ``limit`` bytes; zlib.error if it is not whole."""
    inflater = zlib.decompressobj(wbits)
    out = inflater.decompress(body, limit + 1)
    if len(out) > limit or inflater.unconsumed_tail:
        raise too_large(limit)
    if not inflater.eof:
        raise zlib.error("incomplete or truncated stream")
    return out


def _decoded(body: bytes, encoding: str, limit: int) -> bytes:
    encoding = encoding.strip().lower()
    try:
        if encoding in {"gzip", "x-gzip"}:
            return _inflate(body, 16 + zlib.MAX_WBITS, limit)
        if encoding == "deflate":
            try:
                return _inflate(body, zlib.MAX_WBITS, limit)
            except zlib.error:  # raw deflate, without the zlib header some servers omit
                return _inflate(body, -zlib.MAX_WBITS, limit)
    except zlib.error as err:
        raise TransportError(f"the answer's {encoding} body does not decompress: {err}") from err
    return body


class PlainHttp:
    """Keep-alive connections over plain TCP, pooled per host and port, for whole
    (not streamed) requests to http:// URLs. ``restricted``: see the module."""

    def __init__(self, *, restricted: bool = False, max_connections: int = MAX_CONNECTIONS) -> None:
        self.restricted = restricted
        self._idle: dict[tuple[str, int], list[_Connection]] = {}
        self._slots = asyncio.Semaphore(max_connections)
        self._open: set[_Connection] = set()

    async def send(self, request: Request) -> Response:
        url = request.url
        host = url.raw_host or ""
        port = url.port or 80
        head = _head(request, host)
        if self._slots.locked():  # every connection busy: wait for one, within the timeout
            try:
                async with asyncio.timeout(request.timeout):
                    await self._slots.acquire()
            except TimeoutError as err:
                raise TransportTimeout(f"no free connection within {request.timeout:g} s") from err
        else:
            await self._slots.acquire()
        try:
            status, headers, body = await self._exchange(host, port, head, request)
        finally:
            self._slots.release()
        response_headers = CIMultiDictProxy(CIMultiDict(headers))
        encoding = response_headers.get("content-encoding")
        if encoding:
            body = _decoded(body, encoding, request.max_bytes)
        return Response(status, response_headers, url, content=body)

    async def _exchange(self, host: str, port: int, head: bytes, request: Request) -> Answer:
        connection, reused = await self._connection(host, port, request.connect_timeout)
        try:
            try:
                answer = await connection.exchange(
                    head, request.body, request.timeout, request.max_bytes
                )
            except _Closed as err:
                if not reused or err.started:
                    raise
                self._forget(connection)  # closed while idle: once more, on a new one
                connection = await self._connect(host, port, request.connect_timeout)
                answer = await connection.exchange(
                    head, request.body, request.timeout, request.max_bytes
                )
        except BaseException:  # cut off mid-answer (or cancelled): the connection is spent
            connection.close()
            self._forget(connection)
            raise
        if connection.closed:
            self._forget(connection)
        else:
            self._idle.setdefault((host, port), []).append(connection)
        return answer

    async def _connection(
        self, host: str, port: int, connect_timeout: float
    ) -> tuple[_Connection, bool]:
        """An idle connection to (host, port), or a new one; and whether it was idle."""
        idle = self._idle.get((host, port))
        now = time.monotonic()
        while idle:
            connection = idle.pop()
            if not connection.closed and now - connection.idle_since < IDLE_SECONDS:
                return connection, True
            connection.close()
            self._forget(connection)
        return await self._connect(host, port, connect_timeout), False

    def _forget(self, connection: _Connection) -> None:
        self._open.discard(connection)

    async def _connect(self, host: str, port: int, timeout: float) -> _Connection:
        loop = asyncio.get_running_loop()
        name = host.strip("[]")  # an IPv6 literal, bracketed in the URL
        try:
            async with asyncio.timeout(timeout):
                addresses = await self._addresses(name, port) if self.restricted else [name]
                last: OSError | None = None
                for address in addresses:
                    try:
                        _, connection = await loop.create_connection(_Connection, address, port)
                    except OSError as err:
                        last = err
                        continue
                    self._open.add(connection)
                    return connection
                raise last or OSError(errno.EHOSTUNREACH, "no address to connect to")
        except TimeoutError as err:
            raise TransportTimeout(f"cannot connect to {host}:{port} within {timeout:g} s") from err
        except socket.gaierror as err:
            raise TransportError(f"cannot resolve {host}: {err.strerror}", "dns") from err
        except OSError as err:
            reason = os.strerror(err.errno) if err.errno and err.errno > 0 else str(err)
            raise TransportError(f"cannot connect to {host}:{port}: {reason}") from err

    async def _addresses(self, name: str, port: int) -> list[str]:
        """Where a restricted backend's ``name`` may be reached: every address it
        resolves to must be allowed (a literal resolves to itself, in any spelling)."""
        infos = await asyncio.get_running_loop().getaddrinfo(name, port, type=socket.SOCK_STREAM)
        addresses = list(dict.fromkeys(str(info[4][0]) for info in infos))
        if not addresses or not all(spelled_allowed(a) for a in addresses):
            raise TransportError(f"{name} is an address this backend may not reach", "blocked")
        return addresses

    async def aclose(self) -> None:
        for connection in self._open:
            connection.close()
        self._open.clear()
        self._idle.clear()


class NetworkTransport:
    """The transport the product uses: whole requests to http:// URLs over
    :class:`PlainHttp`; TLS, streamed answers and the rare rest (HEAD, credentials
    in the URL) over aiohttp (transport.py). Both guard addresses alike."""

    def __init__(self, *, restricted: bool = False) -> None:
        self.restricted = restricted
        self._plain = PlainHttp(restricted=restricted)
        self._aiohttp = AiohttpTransport(restricted=restricted)

    async def send(self, request: Request, *, stream: bool = False) -> Response:
        url = request.url
        if stream or url.scheme != "http" or request.method == "HEAD" or url.user is not None:
            return await self._aiohttp.send(request, stream=stream)
        return await self._plain.send(request)

    async def aclose(self) -> None:
        await self._plain.aclose()
        await self._aiohttp.aclose()

"""The wire under the client: request and response values, and aiohttp moving them.

:class:`~backends.http.client.HttpClient` decides what to send, when to retry
and what an error means; a *transport* only carries one :class:`Request` to
the server and brings back one :class:`Response`, raising
:class:`TransportError` when the bytes do not make it (refused, reset, timed
out).

:class:`AiohttpTransport` carries what the product's transport (plain.py,
NetworkTransport) does not send itself: TLS, streamed answers. Measured in
one run (bench/http_transports.py), the query path's request and its JSON
answer cost the client 191 µs of CPU through aiohttp, against 790 µs through
httpx and 91 µs over plain.py, one at a time (medians of five rounds). The test suite
swaps in a transport built on httpx, whose mocks (respx,
``httpx.MockTransport``) it uses (tests/httpx_transport.py).

A *restricted* transport (a backend a tenant registered) connects only where
backends/addresses.py allows, judged on the addresses the resolver returned,
at connect time, so DNS rebinding after the URL was saved gains nothing.
"""

from __future__ import annotations

import codecs
import json
import os
import re
import socket
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import aiohttp
from aiohttp.abc import AbstractResolver, ResolveResult
from aiohttp.helpers import is_ip_address
from aiohttp.resolver import DefaultResolver
from yarl import URL

from backends.addresses import AddressNotAllowed, spelled_allowed
from backends.http.limits import DOCUMENT_BYTES, KEEPALIVE_SECONDS, MAX_CONNECTIONS

_LINE_END = re.compile(r"\r\n|\r|\n")
_CHARSET = re.compile(r";\s*charset=[\"']?([\w.:-]+)", re.IGNORECASE)


class TransportError(Exception):
    """The request or its answer did not cross the wire (refused, reset, cut short).

    ``kind`` says which way it failed: ``connection`` (refused, reset, not
    HTTP), ``dns`` (the name did not resolve), ``blocked`` (an address the
    backend may not reach), ``tls``, ``timeout`` or ``too_large`` (more than the
    request's ``max_bytes``: reading stopped there). The message is the
    library's own words, for the log only: callers describe the failure by kind.
    """

    kind = "connection"

    def __init__(self, message: str, kind: str | None = None) -> None:
        super().__init__(message)
        if kind is not None:
            self.kind = kind


class TransportTimeout(TransportError):
    """No connection, or no more of the answer, within the timeout."""

    kind = "timeout"


def loads(text: str | bytes) -> Any:
    """JSON a server sent; ValueError when it is not JSON, or nests too deeply to read.

    The json module recurses: ``[[[...]]]`` a few thousand levels deep raises
    RecursionError, which would escape every ``except ValueError`` that reads a
    backend's JSON and answer 500. Every read of what a server sends goes here.
    """
    try:
        return json.loads(text)
    except RecursionError as err:
        raise ValueError("the JSON nests too deeply to read") from err


def too_large(limit: int) -> TransportError:
    """The error for an answer past ``limit`` bytes (reading it stops there)."""
    return TransportError(f"the answer is larger than {limit} bytes", "too_large")


@dataclass(frozen=True, slots=True)
class Request:
    method: str
    url: URL
    headers: Mapping[str, str]
    body: bytes | None
    timeout: float  # seconds to wait for a connection, and between bytes of the answer
    connect_timeout: float
    max_bytes: int = DOCUMENT_BYTES  # of the answer's body, decompressed; more is too_large


class Response:
    """A backend's answer: status, headers, and a body read whole or as it arrives.

    A body that arrives is bounded by ``max_bytes`` (None: unbounded): past it,
    reading raises a ``too_large`` TransportError.
    """

    __slots__ = ("_chunks", "_content", "_release", "headers", "max_bytes", "status_code", "url")

    def __init__(
        self,
        status_code: int,
        headers: Mapping[str, str],
        url: URL,
        *,
        content: bytes | None = None,
        chunks: AsyncIterator[bytes] | None = None,
        release: Callable[[], Awaitable[None]] | None = None,
        max_bytes: int | None = None,
    ) -> None:
        self.status_code = status_code
        self.headers = headers
        self.url = url
        self.max_bytes = max_bytes
        self._content = content
        self._chunks = chunks
        self._release = release

    @property
    def is_error(self) -> bool:
        return self.status_code >= 400

    @property
    def is_read(self) -> bool:
        return self._content is not None

    @property
    def content(self) -> bytes:
        if self._content is None:
            raise RuntimeError("The body of a streamed response has not been read (aread()).")
        return self._content

    @property
    def encoding(self) -> str:
        found = _CHARSET.search(self.headers.get("content-type", ""))
        if found:
            try:
                return codecs.lookup(found.group(1)).name
            except LookupError:
                pass
        return "utf-8"

    @property
    def text(self) -> str:
        return self.content.decode(self.encoding, errors="replace")

    def json(self) -> Any:
        """The body as JSON; ValueError when it is not (see :func:`loads`)."""
        return loads(self.content)

    async def aread(self) -> bytes:
        if self._content is None:
            self._content = b"".join([chunk async for chunk in self.aiter_bytes()])
        return self._content

    async def aiter_bytes(self) -> AsyncIterator[bytes]:
        if self._content is not None:
            yield self._content
        elif self._chunks is not None:
            chunks, self._chunks = self._chunks, None  # a body can be read once
            read = 0
            async for chunk in chunks:
                read += len(chunk)
                if self.max_bytes is not None and read > self.max_bytes:
                    raise too_large(self.max_bytes)
                yield chunk

    async def aiter_lines(self) -> AsyncIterator[str]:
        """The body's lines as they arrive, split at CRLF, LF or CR (as SSE allows)."""
        decoder = codecs.getincrementaldecoder(self.encoding)(errors="replace")
        pending = ""
        async for chunk in self.aiter_bytes():
            text = pending + decoder.decode(chunk)
            held = ""
            if text.endswith("\r"):  # the LF of a CRLF may be in the next chunk
                text, held = text[:-1], "\r"
            *lines, pending = _LINE_END.split(text)
            pending += held
            for line in lines:
                yield line
        *lines, last = _LINE_END.split(pending + decoder.decode(b"", final=True))
        for line in lines:
            yield line
        if last:
            yield last

    async def aclose(self) -> None:
        release, self._release = self._release, None
        if release is not None:
            await release()


class Transport(Protocol):
    async def send(self, request: Request, *, stream: bool = False) -> Response:
        """Send ``request``; with ``stream`` the body is left to read as it arrives."""

    async def aclose(self) -> None: ...


def _kind(err: BaseException) -> str:
    if isinstance(err, TimeoutError):  # aiohttp's connect and read timeouts subclass it
        return "timeout"
    if isinstance(err, AddressNotAllowed) or isinstance(
        getattr(err, "os_error", None), AddressNotAllowed
    ):
        return "blocked"
    if isinstance(err, aiohttp.ClientConnectorDNSError):
        return "dns"
    if isinstance(err, aiohttp.ClientSSLError):
        return "tls"
    return "connection"


def _reason(err: aiohttp.ClientConnectorError) -> str:
    os_error = err.os_error
    if os_error.errno and os_error.errno > 0:  # asyncio's text here is "Connect call failed"
        return os.strerror(os_error.errno)
    return os_error.strerror or str(os_error) or type(os_error).__name__  # resolver errors


def _describe(err: BaseException) -> str:
    """The failure in Flywheel's words, for the log: aiohttp's own text for a plain
    connection names TLS settings ("ssl:default") that an http:// URL never used."""
    if isinstance(err, aiohttp.ClientConnectorDNSError):
        return f"cannot resolve {err.host}: {_reason(err)}"
    if isinstance(err, aiohttp.ClientSSLError):
        return f"TLS with {err.host}:{err.port} failed: {_reason(err)}"
    if isinstance(err, aiohttp.ClientConnectorError):
        return f"cannot connect to {err.host}:{err.port}: {_reason(err)}"
    return f"{type(err).__name__}: {err}" if str(err) else type(err).__name__


def _transport_error(err: BaseException) -> TransportError:
    message = _describe(err)
    kind = _kind(err)
    return TransportTimeout(message) if kind == "timeout" else TransportError(message, kind)


class GuardedResolver(AbstractResolver):
    """aiohttp's resolver, refusing any answer that holds an address the policy forbids.

    Every address must pass, not just the first: aiohttp tries them in turn.
    """

    def __init__(self) -> None:
        self._resolver = DefaultResolver()

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        results = await self._resolver.resolve(host, port, family)
        if not all(spelled_allowed(result["host"]) for result in results):
            raise AddressNotAllowed(f"{host} resolves to an address this backend may not reach")
        return results

    async def close(self) -> None:
        await self._resolver.close()


def _check_literal(url: URL) -> None:
    """aiohttp skips the resolver for a host it takes for an IP literal: judge those here."""
    host = url.raw_host or ""
    if is_ip_address(host) and not spelled_allowed(host):
        raise TransportError(f"{host} is an address this backend may not reach", "blocked")


class AiohttpTransport:
    """Requests to one backend over one aiohttp session and its connection pool.

    The session is opened on first use, inside the event loop that uses it
    (an aiohttp session belongs to one loop). A ``restricted`` transport
    connects only to addresses backends/addresses.py allows.
    """

    def __init__(self, *, restricted: bool = False) -> None:
        self.restricted = restricted
        self._session: aiohttp.ClientSession | None = None
        self._resolver: GuardedResolver | None = None
        self._timeouts: dict[tuple[float, float], aiohttp.ClientTimeout] = {}

    def _open(self) -> aiohttp.ClientSession:
        if self._session is None:
            if self.restricted:
                self._resolver = GuardedResolver()
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(
                    limit=MAX_CONNECTIONS,
                    limit_per_host=0,
                    keepalive_timeout=KEEPALIVE_SECONDS,
                    resolver=self._resolver,
                ),
                trust_env=False,
            )
        return self._session

    def _timeout(self, request: Request) -> aiohttp.ClientTimeout:
        key = (request.timeout, request.connect_timeout)
        timeout = self._timeouts.get(key)
        if timeout is None:
            timeout = self._timeouts[key] = aiohttp.ClientTimeout(
                total=None,
                connect=request.timeout,  # waiting for a pooled connection, then connecting
                sock_connect=request.connect_timeout,
                sock_read=request.timeout,
            )
        return timeout

    async def send(self, request: Request, *, stream: bool = False) -> Response:
        if self.restricted:
            _check_literal(request.url)
        try:
            response = await self._open().request(
                request.method,
                request.url,
                headers=request.headers,
                data=request.body,
                timeout=self._timeout(request),
                allow_redirects=False,  # a redirect is the caller's to follow or not
            )
        except (TimeoutError, aiohttp.ClientError) as err:
            raise _transport_error(err) from err
        if stream:
            return Response(
                response.status,
                response.headers,
                request.url,
                chunks=_chunks(response),
                release=_releaser(response),
                max_bytes=request.max_bytes,
            )
        try:
            content = await _read(response, request.max_bytes)
        except (TimeoutError, aiohttp.ClientError) as err:
            raise _transport_error(err) from err
        finally:
            response.release()
        return Response(response.status, response.headers, request.url, content=content)

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None
        if self._resolver is not None:  # a resolver given to a connector is not its to close
            await self._resolver.close()
            self._resolver = None


async def _read(response: aiohttp.ClientResponse, limit: int) -> bytes:
    """The whole body (decompressed), read no further than ``limit`` bytes."""
    if response.content_length is not None and response.content_length > limit:
        raise too_large(limit)  # said in advance: not a byte of it is read
    body = bytearray()
    async for chunk in response.content.iter_any():
        body += chunk
        if len(body) > limit:
            raise too_large(limit)
    return bytes(body)


async def _chunks(response: aiohttp.ClientResponse) -> AsyncIterator[bytes]:
    try:
        async for chunk in response.content.iter_any():
            yield chunk
    except (TimeoutError, aiohttp.ClientError) as err:
        raise _transport_error(err) from err


def _releaser(response: aiohttp.ClientResponse) -> Callable[[], Awaitable[None]]:
    async def release() -> None:
        response.release()

    return release

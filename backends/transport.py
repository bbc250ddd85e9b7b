"""The network under the backend clients: httpx's interface on aiohttp's connection pool.

httpx gives the adapters a clean request/response model, and the test suite
mocks backends at httpx's level. Its own connection pool (httpcore) is the
expensive part: about 0.5 ms of CPU per request here, and with hundreds of
requests in flight it walks every pooled connection for every request, so
its cost grows with the square of the load. aiohttp's pool hands out a
connection in constant time and parses responses in C.

:class:`AiohttpTransport` is an ``httpx.AsyncBaseTransport``: httpx builds
the request (URL, headers, JSON) and decodes the response (Content-Encoding,
charset, JSON) as before; aiohttp only moves the bytes. Timeouts are httpx's
(connect / read / pool) and failures are raised as httpx's exceptions, so
callers cannot tell the difference.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import aiohttp
import httpx

# Connections kept open to one backend; more requests than this wait for one.
MAX_CONNECTIONS = 1000
KEEPALIVE_SECONDS = 15.0


class _Body(httpx.AsyncByteStream):
    """A response body read from aiohttp as it arrives; closing releases the connection."""

    def __init__(self, response: aiohttp.ClientResponse, request: httpx.Request) -> None:
        self._response = response
        self._request = request

    async def __aiter__(self) -> AsyncIterator[bytes]:
        try:
            async for chunk in self._response.content.iter_any():
                yield chunk
        except (TimeoutError, aiohttp.ClientError) as err:
            raise _httpx_error(err, self._request) from err

    async def aclose(self) -> None:
        self._response.release()


def _timeout(request: httpx.Request) -> aiohttp.ClientTimeout:
    timeout = request.extensions.get("timeout", {})
    return aiohttp.ClientTimeout(
        total=None,
        connect=timeout.get("pool"),  # waiting for a free connection
        sock_connect=timeout.get("connect"),
        sock_read=timeout.get("read"),
    )


def _httpx_error(err: BaseException, request: httpx.Request) -> httpx.TransportError:
    """The httpx exception a caller of httpx would have seen for ``err``."""
    message = str(err) or type(err).__name__
    if isinstance(err, aiohttp.ConnectionTimeoutError):
        return httpx.ConnectTimeout(message, request=request)
    if isinstance(err, asyncio.TimeoutError):  # aiohttp's read timeouts subclass it
        return httpx.ReadTimeout(message, request=request)
    if isinstance(err, aiohttp.ClientConnectorError):
        return httpx.ConnectError(message, request=request)
    if isinstance(err, aiohttp.ServerDisconnectedError | aiohttp.ClientPayloadError):
        return httpx.RemoteProtocolError(message, request=request)
    if isinstance(err, aiohttp.ClientOSError):
        return httpx.ReadError(message, request=request)
    return httpx.NetworkError(message, request=request)


class AiohttpTransport(httpx.AsyncBaseTransport):
    """An httpx transport that sends requests through one aiohttp session.

    The session is opened on first use, inside the event loop that uses it
    (an aiohttp session belongs to one loop, as an httpx client does).
    """

    def __init__(self) -> None:
        self._session: aiohttp.ClientSession | None = None

    def _open(self) -> aiohttp.ClientSession:
        if self._session is None:
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(
                    limit=MAX_CONNECTIONS, limit_per_host=0, keepalive_timeout=KEEPALIVE_SECONDS
                ),
                auto_decompress=False,  # httpx decodes Content-Encoding itself
                skip_auto_headers=("User-Agent", "Accept", "Accept-Encoding", "Content-Type"),
                trust_env=False,
            )
        return self._session

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        session = self._open()
        headers = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in request.headers.raw]
        try:
            response = await session.request(
                request.method,
                str(request.url),
                headers=headers,
                data=await request.aread() or None,
                timeout=_timeout(request),
                allow_redirects=False,  # httpx decides about redirects
            )
        except (TimeoutError, aiohttp.ClientError) as err:
            raise _httpx_error(err, request) from err
        return httpx.Response(
            response.status,
            headers=[(k.decode("latin-1"), v.decode("latin-1")) for k, v in response.raw_headers],
            stream=_Body(response, request),
            extensions={"http_version": b"HTTP/1.1"},
        )

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

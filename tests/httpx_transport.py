"""A transport for HttpClient that sends through httpx, for the unit tests.

The product carries outbound requests on httptools and aiohttp
(backends/http/plain.py and transport.py, proven against real sockets in
tests/backends/http/test_transport.py and against the real servers in
tests/live/). Unit tests stand servers in (backends, the LLM, embeddings)
with httpx's mocks: respx, which patches httpx's network layer, and
``httpx.MockTransport`` handlers fed with responses captured from the real
servers. This transport lets HttpClient, the adapters and the
OpenAI-compatible helper run unchanged on top of those mocks.

It takes ``restricted`` like the product's transport but does not guard
addresses: mocked hosts resolve nowhere. The address guard is the product
transports', proven on real sockets (tests/backends/http/test_transport.py,
tests/scenarios/test_backend_security.py).
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx

from backends.http import Request, Response, TransportError, TransportTimeout


class HttpxTransport:
    def __init__(
        self, transport: httpx.AsyncBaseTransport | None = None, *, restricted: bool = False
    ) -> None:
        self.restricted = restricted
        self._client = httpx.AsyncClient(transport=transport or httpx.AsyncHTTPTransport())

    async def send(self, request: Request, *, stream: bool = False) -> Response:
        built = self._client.build_request(
            request.method,
            str(request.url),
            headers=dict(request.headers),
            content=request.body,
            timeout=httpx.Timeout(request.timeout, connect=request.connect_timeout),
        )
        try:
            response = await self._client.send(built, stream=stream)
        except httpx.HTTPError as err:
            raise _transport_error(err) from err
        if not stream:
            return Response(
                response.status_code, response.headers, request.url, content=response.content
            )
        return Response(
            response.status_code,
            response.headers,
            request.url,
            chunks=_chunks(response),
            release=response.aclose,
        )

    async def aclose(self) -> None:
        await self._client.aclose()


async def _chunks(response: httpx.Response) -> AsyncIterator[bytes]:
    try:
        async for chunk in response.aiter_bytes():
            yield chunk
    except httpx.HTTPError as err:
        raise _transport_error(err) from err


def _transport_error(err: httpx.HTTPError) -> TransportError:
    message = f"{type(err).__name__}: {err}" if str(err) else type(err).__name__
    if isinstance(err, httpx.TimeoutException):
        return TransportTimeout(message)
    return TransportError(message, "connection")

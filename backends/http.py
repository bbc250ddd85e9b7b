"""All HTTP to backends goes through :class:`HttpClient`: one pooled client per
backend, explicit timeouts, a bounded retry budget for idempotent calls, and
transport failures turned into typed errors.

The client decides; a transport (backends/transport.py) carries the bytes.
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from typing import Any

from yarl import URL

from backends.errors import (
    BackendConnectionError,
    BackendError,
    BackendTimeoutError,
    BackendUnexpectedError,
)
from backends.transport import (
    AiohttpTransport,
    Request,
    Response,
    Transport,
    TransportError,
    TransportTimeout,
)

# Connecting should be quick on the networks backends live on; the read
# timeout is the backend's own setting (a flow may think for a while).
CONNECT_TIMEOUT_SECONDS = 5.0
# Statuses worth retrying: the server says "not now", not "never".
RETRY_STATUSES = frozenset({408, 429, 502, 503, 504})
IDEMPOTENT_METHODS = frozenset({"GET", "HEAD", "OPTIONS", "PUT", "DELETE"})
BODY_EXCERPT_CHARS = 300

ErrorMapper = Callable[[Response, str], BackendError]


def ms_since(started: float) -> float:
    """Milliseconds since ``started`` (a time.perf_counter() reading), to 0.01 ms."""
    return round((time.perf_counter() - started) * 1000, 2)


def body_excerpt(response: Response) -> str:
    """The start of a response body, for error details (never the whole page)."""
    return response.text[:BODY_EXCERPT_CHARS] if response.is_read else ""


def json_body(response: Response, backend: str) -> Any:
    """Decode a JSON body or raise BackendUnexpectedError saying what came instead."""
    try:
        return response.json()
    except ValueError as err:
        raise BackendUnexpectedError(
            "The backend answered with something that is not JSON.",
            backend=backend,
            http_status=response.status_code,
            details={
                "content_type": response.headers.get("content-type", ""),
                "body": body_excerpt(response),
            },
        ) from err


def network_transport() -> Transport:
    """What carries requests when no transport is given: aiohttp (backends/transport.py).

    The test suite swaps in one built on httpx, whose backend mocks it uses.
    """
    return AiohttpTransport()


class HttpClient:
    """A pooled async HTTP client for one backend."""

    max_retries = 2
    backoff_base_seconds = 0.25
    backoff_cap_seconds = 2.0
    retry_after_cap_seconds = 10.0

    def __init__(
        self,
        *,
        base_url: str,
        backend_name: str,
        error_mapper: ErrorMapper,
        headers: Mapping[str, str] | None = None,
        timeout_seconds: float = 60.0,
        transport: Transport | None = None,
    ) -> None:
        self.backend_name = backend_name
        self.timeout_seconds = timeout_seconds
        self._base_url = base_url.rstrip("/")
        self._headers = dict(headers or {})
        self._json_headers = {**self._headers, "Content-Type": "application/json"}
        self._map_error = error_mapper
        self._transport = transport or network_transport()

    def _request(
        self,
        method: str,
        path: str,
        params: Mapping[str, str | int] | None,
        json_data: Any,
        timeout: float | None,
    ) -> Request:
        url = URL(self._base_url + path)
        if params:
            url = url.update_query(params)
        body = None
        if json_data is not None:
            body = json.dumps(json_data, ensure_ascii=False, separators=(",", ":")).encode()
        return Request(
            method=method.upper(),
            url=url,
            headers=self._headers if body is None else self._json_headers,
            body=body,
            timeout=self.timeout_seconds if timeout is None else timeout,
            connect_timeout=CONNECT_TIMEOUT_SECONDS,
        )

    async def request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, str | int] | None = None,
        json: Any = None,
        retry: bool | None = None,
        timeout: float | None = None,
    ) -> Response:
        """Send a request; return a 2xx/3xx response, read whole, or raise a typed BackendError.

        Idempotent methods (and calls passed ``retry=True``) are retried on
        connection failures and on 408/429/502/503/504, with capped exponential
        backoff and jitter, honouring Retry-After.
        """
        request = self._request(method, path, params, json, timeout)
        may_retry = request.method in IDEMPOTENT_METHODS if retry is None else retry
        attempt = 0
        while True:
            try:
                response = await self._transport.send(request)
            except TransportError as err:
                if may_retry and attempt < self.max_retries:
                    await asyncio.sleep(self._backoff(attempt, None))
                    attempt += 1
                    continue
                raise self._transport_error(err, request) from err
            if response.status_code in RETRY_STATUSES and may_retry and attempt < self.max_retries:
                await asyncio.sleep(self._backoff(attempt, response))
                attempt += 1
                continue
            if response.is_error:
                raise self._map_error(response, self.backend_name)
            return response

    @asynccontextmanager
    async def stream(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, str | int] | None = None,
        json: Any = None,
    ) -> AsyncIterator[Response]:
        """Open a streamed response; errors before and while the body arrives are typed
        like request()'s. The connection is released when the block ends."""
        request = self._request(method, path, params, json, None)
        try:
            response = await self._transport.send(request, stream=True)
        except TransportError as err:
            raise self._transport_error(err, request) from err
        try:
            if response.is_error:
                await response.aread()
                raise self._map_error(response, self.backend_name)
            yield response
        except TransportError as err:
            raise self._transport_error(err, request) from err
        finally:
            await response.aclose()

    def _transport_error(self, err: TransportError, request: Request) -> BackendError:
        name = self.backend_name
        if isinstance(err, TransportTimeout):
            return BackendTimeoutError(
                f"Backend {name!r} did not answer in time ({err}).",
                backend=name,
                details={"timeout_seconds": request.timeout},
            )
        return BackendConnectionError(
            f"Backend {name!r} could not be reached: {err}.", backend=name
        )

    def _backoff(self, attempt: int, response: Response | None) -> float:
        if response is not None:
            retry_after = response.headers.get("retry-after", "")
            if retry_after.isdigit():
                return min(float(retry_after), self.retry_after_cap_seconds)
        delay = min(self.backoff_cap_seconds, self.backoff_base_seconds * 2**attempt)
        return delay * (0.5 + random.random() / 2)  # noqa: S311 - jitter, not cryptography

    async def aclose(self) -> None:
        await self._transport.aclose()

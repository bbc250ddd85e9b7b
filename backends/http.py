"""All HTTP to backends goes through :class:`HttpClient`: one pooled httpx client
per backend, explicit timeouts, a bounded retry budget for idempotent calls,
and transport failures turned into typed errors.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from typing import Any

import httpx

from backends.errors import (
    BackendConnectionError,
    BackendError,
    BackendTimeoutError,
    BackendUnexpectedError,
)
from backends.transport import AiohttpTransport

# Connecting should be quick on the networks backends live on; the read
# timeout is the backend's own setting (a flow may think for a while).
CONNECT_TIMEOUT_SECONDS = 5.0
# Statuses worth retrying: the server says "not now", not "never".
RETRY_STATUSES = frozenset({408, 429, 502, 503, 504})
IDEMPOTENT_METHODS = frozenset({"GET", "HEAD", "OPTIONS", "PUT", "DELETE"})
BODY_EXCERPT_CHARS = 300

ErrorMapper = Callable[[httpx.Response, str], BackendError]


def ms_since(started: float) -> float:
    """Milliseconds since ``started`` (a time.perf_counter() reading), to 0.01 ms."""
    return round((time.perf_counter() - started) * 1000, 2)


def body_excerpt(response: httpx.Response) -> str:
    """The start of a response body, for error details (never the whole page)."""
    try:
        text = response.text
    except httpx.ResponseNotRead:
        return ""
    return text[:BODY_EXCERPT_CHARS]


def json_body(response: httpx.Response, backend: str) -> Any:
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


def network_transport() -> httpx.AsyncBaseTransport:
    """What carries requests when no transport is given: aiohttp's pool (backends/transport.py).

    The test suite swaps in httpx's own transport, which its backend mocks (respx) patch.
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
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.backend_name = backend_name
        self.timeout_seconds = timeout_seconds
        self._map_error = error_mapper
        self._client = httpx.AsyncClient(
            base_url=base_url.rstrip("/"),
            headers=dict(headers or {}),
            timeout=httpx.Timeout(timeout_seconds, connect=CONNECT_TIMEOUT_SECONDS),
            transport=transport or network_transport(),
        )

    async def request(
        self,
        method: str,
        path: str,
        *,
        retry: bool | None = None,
        timeout: float | None = None,
        **kwargs: Any,
    ) -> httpx.Response:
        """Send a request; return a 2xx/3xx response or raise a typed BackendError.

        Idempotent methods (and calls passed ``retry=True``) are retried on
        connection failures and on 408/429/502/503/504, with capped exponential
        backoff and jitter, honouring Retry-After.
        """
        may_retry = method.upper() in IDEMPOTENT_METHODS if retry is None else retry
        if timeout is not None:
            kwargs["timeout"] = httpx.Timeout(timeout, connect=CONNECT_TIMEOUT_SECONDS)
        attempt = 0
        while True:
            try:
                response = await self._client.request(method, path, **kwargs)
            except httpx.HTTPError as err:
                error = self._transport_error(err)
                if may_retry and attempt < self.max_retries:
                    await asyncio.sleep(self._backoff(attempt, None))
                    attempt += 1
                    continue
                raise error from err
            if response.status_code in RETRY_STATUSES and may_retry and attempt < self.max_retries:
                await asyncio.sleep(self._backoff(attempt, response))
                attempt += 1
                continue
            if response.is_error:
                raise self._map_error(response, self.backend_name)
            return response

    @asynccontextmanager
    async def stream(self, method: str, path: str, **kwargs: Any) -> AsyncIterator[httpx.Response]:
        """Open a streamed response; errors before the body starts are typed like request()."""
        try:
            async with self._client.stream(method, path, **kwargs) as response:
                if response.is_error:
                    await response.aread()
                    raise self._map_error(response, self.backend_name)
                yield response
        except httpx.HTTPError as err:
            raise self._transport_error(err) from err

    def _transport_error(self, err: httpx.HTTPError) -> BackendError:
        name = self.backend_name
        if isinstance(err, httpx.TimeoutException):
            return BackendTimeoutError(
                f"Backend {name!r} did not answer in time ({type(err).__name__}).",
                backend=name,
                details={"timeout_seconds": self.timeout_seconds},
            )
        if isinstance(err, httpx.TransportError):
            return BackendConnectionError(
                f"Backend {name!r} could not be reached: {err or type(err).__name__}.",
                backend=name,
            )
        return BackendUnexpectedError(
            f"HTTP error talking to backend {name!r}: {err}.", backend=name
        )

    def _backoff(self, attempt: int, response: httpx.Response | None) -> float:
        if response is not None:
            retry_after = response.headers.get("retry-after", "")
            if retry_after.isdigit():
                return min(float(retry_after), self.retry_after_cap_seconds)
        delay = min(self.backoff_cap_seconds, self.backoff_base_seconds * 2**attempt)
        return delay * (0.5 + random.random() / 2)  # noqa: S311 - jitter, not cryptography

    async def aclose(self) -> None:
        await self._client.aclose()

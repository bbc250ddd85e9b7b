"""All outbound HTTP goes through :class:`HttpClient`: one pooled client per
server, explicit timeouts, a bounded retry budget for idempotent calls, and
transport failures turned into typed errors.

The client decides; a transport (transport.py, plain.py) carries the bytes,
within the bounds of limits.py. What a failure says is Flywheel's own
account (kind of failure, HTTP status, content type, size), never a reply's
body or the library's words, and every error leaving the client is scrubbed
of the credentials it sent (redact.py): error text reaches tenants,
decisions and logs.
"""

from __future__ import annotations

import asyncio
import logging
import random
import re
import time
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from typing import Any

from yarl import URL

from backends.errors import (
    BackendConfigurationError,
    BackendConnectionError,
    BackendError,
    BackendTimeoutError,
    BackendUnexpectedError,
)
from backends.http import limits
from backends.http.plain import NetworkTransport
from backends.http.redact import redact, redact_value, secret_spellings
from backends.http.transport import (
    Request,
    Response,
    Transport,
    TransportError,
    TransportTimeout,
    too_large,
)
from flywheel.jsonout import dumps

# Statuses worth retrying: the server says "not now", not "never".
RETRY_STATUSES = frozenset({408, 429, 502, 503, 504})
IDEMPOTENT_METHODS = frozenset({"GET", "HEAD", "OPTIONS", "PUT", "DELETE"})
# How a transport failure is told, by its kind: (the kind a caller sees, the words).
# A name that does not resolve and one that resolves somewhere forbidden read the
# same, so the answers are no oracle for which internal names exist.
_UNRESOLVED = (
    "address",
    "could not be reached (its host did not resolve to an address it may use)",
)
FAILURES = {
    "connection": ("connection", "could not be reached (the connection failed)"),
    "dns": _UNRESOLVED,
    "blocked": _UNRESOLVED,
    "tls": ("tls", "could not be reached (the TLS handshake failed)"),
}
# Header values travel as bytes on the wire: a CR or LF would split the request.
_SENDABLE = re.compile(r"[\x20-\x7e]*")
_MEDIA_TYPE = re.compile(r"[a-z0-9][a-z0-9!#$&.+^_-]{0,63}/[a-z0-9][a-z0-9!#$&.+^_-]{0,63}")

ErrorMapper = Callable[[Response, str], BackendError]
logger = logging.getLogger(__name__)


def ms_since(started: float) -> float:
    """Milliseconds since ``started`` (a time.perf_counter() reading), to 0.01 ms."""
    return round((time.perf_counter() - started) * 1000, 2)


def content_type(response: Response) -> str:
    """The reply's media type when it looks like one (``text/html``), else ``unknown``."""
    media = response.headers.get("content-type", "").split(";")[0].strip().lower()
    return media if _MEDIA_TYPE.fullmatch(media) else "unknown"


def reply_details(response: Response) -> dict[str, Any]:
    """What Flywheel tells of a reply it does not repeat: its content type and size."""
    length = response.headers.get("content-length", "")
    size = len(response.content) if response.is_read else int(length) if length.isdigit() else None
    return {"content_type": content_type(response), "size": size}


def describe(response: Response) -> str:
    """A reply in Flywheel's words, e.g. ``HTTP 500, text/html, 1234 bytes``: never its body."""
    details = reply_details(response)
    size = "size unknown" if details["size"] is None else f"{details['size']} bytes"
    return f"HTTP {response.status_code}, {details['content_type']}, {size}"


def unreadable(server: str, backend: str, what: str, response: Response) -> BackendUnexpectedError:
    """The error for a reply of ``server`` (e.g. "Flowise") that is not the ``what`` asked
    for, described in Flywheel's words (never its body)."""
    return BackendUnexpectedError(
        f"{server} backend {backend!r} answered with a {what} Flywheel cannot read "
        f"({describe(response)}).",
        backend=backend,
        http_status=response.status_code,
        details=reply_details(response),
    )


def json_body(response: Response, backend: str) -> Any:
    """Decode a JSON body or raise BackendUnexpectedError saying what came instead."""
    try:
        return response.json()
    except ValueError as err:
        raise BackendUnexpectedError(
            f"The backend answered with something that is not JSON ({describe(response)}).",
            backend=backend,
            http_status=response.status_code,
            details=reply_details(response),
        ) from err


def network_transport(*, restricted: bool = False) -> Transport:
    """What carries requests when no transport is given: plain.py's NetworkTransport
    (plain HTTP/1.1 for whole requests to http:// URLs, aiohttp for the rest).

    A ``restricted`` transport reaches only the addresses backends/addresses.py
    allows. The test suite swaps in one built on httpx, whose mocks it uses; the
    address guard is proven on real sockets (tests/backends/http/test_transport.py).
    """
    return NetworkTransport(restricted=restricted)


class HttpClient:
    """A pooled async HTTP client for one server (a backend, the LLM, embeddings)."""

    max_retries = limits.MAX_RETRIES
    backoff_base_seconds = limits.BACKOFF_BASE_SECONDS
    backoff_cap_seconds = limits.BACKOFF_CAP_SECONDS
    retry_after_cap_seconds = limits.RETRY_AFTER_CAP_SECONDS
    # A reply's size bound unless the call names its own (max_bytes=): a flow's answer
    # is bounded by limits.answer_bytes(), a probe by limits.PROBE_BYTES.
    document_bytes = limits.DOCUMENT_BYTES

    def __init__(
        self,
        *,
        base_url: str,
        backend_name: str,
        error_mapper: ErrorMapper,
        headers: Mapping[str, str] | None = None,
        timeout_seconds: float = limits.DEFAULT_TIMEOUT_SECONDS,
        connect_timeout_seconds: float = limits.CONNECT_TIMEOUT_SECONDS,
        transport: Transport | None = None,
        restricted: bool = False,
        log_name: str | None = None,
    ) -> None:
        self.backend_name = backend_name
        self._log_name = f"backend {backend_name}" if log_name is None else log_name
        self.timeout_seconds = timeout_seconds
        self.connect_timeout_seconds = connect_timeout_seconds
        self._base_url = base_url.rstrip("/")
        self._headers = dict(headers or {})
        self._json_headers = {**self._headers, "Content-Type": "application/json"}
        self._map_error = error_mapper
        self._transport = transport or network_transport(restricted=restricted)
        self._secrets = secret_spellings(self._headers.values())
        self._sendable = all(_SENDABLE.fullmatch(v) for v in self._headers.values())

    def clean(self, text: str) -> str:
        """Backend-supplied text made fit to show: credentials we sent (and anything
        shaped like one) removed, control characters gone, cut short."""
        return redact(text, self._secrets)

    def clean_error(self, err: BackendError) -> BackendError:
        """``err`` with its message and details cleaned (see :meth:`clean`); returns it."""
        err.message = self.clean(err.message)
        err.args = (err.message,)
        err.details = redact_value(err.details, self._secrets)
        return err

    def _request(
        self,
        method: str,
        path: str,
        params: Mapping[str, str | int] | None,
        json_data: Any,
        timeout: float | None,
        max_bytes: int | None,
    ) -> Request:
        if not self._sendable:  # a key stored before keys were checked, say
            raise BackendConfigurationError(
                f"Backend {self.backend_name!r} has an API key that cannot be sent "
                "(it holds control or non-ASCII characters); set the key again.",
                backend=self.backend_name,
            )
        url = URL(self._base_url + path)
        if params:
            url = url.update_query(params)
        body = None
        if json_data is not None:
            body = dumps(json_data)
        return Request(
            method=method.upper(),
            url=url,
            headers=self._headers if body is None else self._json_headers,
            body=body,
            timeout=self.timeout_seconds if timeout is None else timeout,
            connect_timeout=self.connect_timeout_seconds,
            max_bytes=self.document_bytes if max_bytes is None else max_bytes,
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
        max_bytes: int | None = None,
    ) -> Response:
        """Send a request; return a 2xx/3xx response, read whole, or raise a typed BackendError.

        Idempotent methods (and calls passed ``retry=True``) are retried on
        connection failures and on 408/429/502/503/504, with capped exponential
        backoff and jitter, honouring Retry-After. A reply past ``max_bytes`` (by
        default ``document_bytes``) is a BackendUnexpectedError, not retried.
        """
        request = self._request(method, path, params, json, timeout, max_bytes)
        may_retry = request.method in IDEMPOTENT_METHODS if retry is None else retry
        attempt = 0
        while True:
            try:
                response = await self._transport.send(request)
            except TransportError as err:
                if may_retry and attempt < self.max_retries and err.kind != "too_large":
                    await asyncio.sleep(self._backoff(attempt, None))
                    attempt += 1
                    continue
                raise self._transport_error(err, request) from err
            if len(response.content) > request.max_bytes:  # whatever the transport
                raise self._transport_error(too_large(request.max_bytes), request)
            if response.status_code in RETRY_STATUSES and may_retry and attempt < self.max_retries:
                await asyncio.sleep(self._backoff(attempt, response))
                attempt += 1
                continue
            if response.is_error:
                raise self.clean_error(self._map_error(response, self.backend_name))
            return response

    @asynccontextmanager
    async def stream(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, str | int] | None = None,
        json: Any = None,
        max_bytes: int | None = None,
    ) -> AsyncIterator[Response]:
        """Open a streamed response; errors before and while the body arrives are typed
        like request()'s, and all its events together are bounded as a reply is. The
        connection is released when the block ends."""
        request = self._request(method, path, params, json, None, max_bytes)
        try:
            response = await self._transport.send(request, stream=True)
        except TransportError as err:
            raise self._transport_error(err, request) from err
        response.max_bytes = request.max_bytes  # whatever the transport
        try:
            if response.is_error:
                await response.aread()
                raise self.clean_error(self._map_error(response, self.backend_name))
            yield response
        except TransportError as err:
            raise self._transport_error(err, request) from err
        finally:
            await response.aclose()

    def _transport_error(self, err: TransportError, request: Request) -> BackendError:
        """Flywheel's words for a failure, by kind: the library's own text (which tells a
        closed port from an open one) goes to the log only."""
        name = self.backend_name
        logger.info("%s: %s %s failed: %s", self._log_name, request.method, request.url.path, err)
        if isinstance(err, TransportTimeout):
            error: BackendError = BackendTimeoutError(
                f"Backend {name!r} did not answer in time.",
                backend=name,
                details={"failure": "timeout", "timeout_seconds": request.timeout},
            )
        elif err.kind == "too_large":
            error = BackendUnexpectedError(
                f"Backend {name!r} sent more than Flywheel reads of an answer "
                f"({request.max_bytes} bytes); it stopped reading.",
                backend=name,
                details={"failure": "too_large", "limit_bytes": request.max_bytes},
            )
        else:
            failure, words = FAILURES.get(err.kind, FAILURES["connection"])
            error = BackendConnectionError(
                f"Backend {name!r} {words}.", backend=name, details={"failure": failure}
            )
        return self.clean_error(error)

    def _backoff(self, attempt: int, response: Response | None) -> float:
        if response is not None:
            retry_after = response.headers.get("retry-after", "")
            if retry_after.isdigit():
                return min(float(retry_after), self.retry_after_cap_seconds)
        delay = min(self.backoff_cap_seconds, self.backoff_base_seconds * 2**attempt)
        return delay * (0.5 + random.random() / 2)  # noqa: S311 - jitter, not cryptography

    async def aclose(self) -> None:
        await self._transport.aclose()

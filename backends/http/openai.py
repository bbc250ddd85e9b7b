"""POST JSON to an OpenAI-compatible endpoint with a bearer key: bounded, typed failures.

The LLM (``/chat/completions``) and embeddings (``/embeddings``) are reached
through this, on the same :class:`~backends.http.client.HttpClient` and
transports as the backends, within the bounds of limits.py.

Their endpoints come from the operator's environment (LLM_BASE_URL,
EMBEDDINGS_BASE_URL), never from a tenant, so they are trusted as
staff-registered backends are: they may point at loopback or a private
network (a local model on 127.0.0.1). Redirects are never followed, so an
endpoint reaches only the host the operator named.

What fails is said by the type of the error (:class:`ConnectError`,
:class:`TimeoutException`, :class:`HTTPStatusError`, :class:`DecodingError`,
named as httpx names its own, so log lines read as they did;
:class:`AnswerTooLarge`, :class:`ConfigurationError`), in Flywheel's words:
never the key, never the reply's body.
"""

from __future__ import annotations

import asyncio
import weakref
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

from backends.errors import (
    BackendConfigurationError,
    BackendConnectionError,
    BackendError,
    BackendTimeoutError,
    BackendUnexpectedError,
)
from backends.http.client import HttpClient, describe
from backends.http.limits import (
    CONNECT_TIMEOUT_SECONDS,
    DEFAULT_TIMEOUT_SECONDS,
    ENDPOINT_ANSWER_BYTES,
    ENDPOINT_BATCH_TIMEOUT_SECONDS,
)
from backends.http.transport import Response, Transport


class EndpointError(Exception):
    """An OpenAI-compatible endpoint gave no usable answer."""


class ConnectError(EndpointError):
    """The endpoint could not be reached (refused, reset, not resolved, TLS)."""


class TimeoutException(EndpointError):
    """No answer within the call's time."""


class HTTPStatusError(EndpointError):
    """The endpoint answered with an error status."""

    def __init__(self, message: str, *, status_code: int) -> None:
        super().__init__(message)
        self.status_code = status_code


class DecodingError(EndpointError):
    """The answer is not JSON."""


class AnswerTooLarge(EndpointError):
    """The answer passed limits.ENDPOINT_ANSWER_BYTES; reading it stopped there."""


class ConfigurationError(EndpointError):
    """The configured key cannot be sent (control or non-ASCII characters)."""


@dataclass(frozen=True)
class OpenAIEndpoint:
    """An OpenAI-compatible endpoint: its base URL (``https://host/v1``) and bearer key."""

    base_url: str
    api_key: str = field(default="", repr=False)
    name: str = "OpenAI-compatible endpoint"

    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}


def _status_error(response: Response, name: str) -> BackendError:
    return BackendUnexpectedError(
        f"The {name} answered {describe(response)}.",
        backend=name,
        http_status=response.status_code,
    )


def _endpoint_error(err: BackendError | TimeoutError, endpoint: OpenAIEndpoint) -> EndpointError:
    name = endpoint.name
    if isinstance(err, TimeoutError | BackendTimeoutError):
        return TimeoutException(f"The {name} did not answer in time.")
    if isinstance(err, BackendConnectionError):
        return ConnectError(f"The {name} could not be reached.")
    if isinstance(err, BackendConfigurationError):
        return ConfigurationError(f"The {name}'s API key cannot be sent; set it again.")
    if err.details.get("failure") == "too_large":
        limit = err.details.get("limit_bytes")
        return AnswerTooLarge(f"The {name} sent more than {limit} bytes of an answer.")
    if err.http_status is not None:
        return HTTPStatusError(
            f"The {name} answered with HTTP {err.http_status}.", status_code=err.http_status
        )
    return EndpointError(f"The {name} failed ({type(err).__name__}).")


class OpenAIClient:
    """One endpoint's pooled client. Not retried: a question's caller has no time to
    wait, and at training the next check tries again."""

    def __init__(
        self,
        endpoint: OpenAIEndpoint,
        *,
        timeout_seconds: float,
        connect_timeout_seconds: float = CONNECT_TIMEOUT_SECONDS,
        transport: Transport | None = None,
    ) -> None:
        self.endpoint = endpoint
        self._http = HttpClient(
            base_url=endpoint.base_url,
            backend_name=endpoint.name,
            log_name=endpoint.name,
            error_mapper=_status_error,
            headers=endpoint.headers(),
            timeout_seconds=timeout_seconds,
            connect_timeout_seconds=connect_timeout_seconds,
            transport=transport,
            restricted=False,  # the operator's endpoint: see the module
        )
        self._http.document_bytes = ENDPOINT_ANSWER_BYTES

    async def post_json(
        self, path: str, body: Any, *, deadline_seconds: float | None = None
    ) -> Any:
        """POST ``body`` as JSON to ``path``; the answer's JSON.

        With ``deadline_seconds`` the whole call (connecting, sending, waiting,
        reading) ends by then, however far it has got. Raises EndpointError.
        """
        try:
            if deadline_seconds is None:
                response = await self._http.request("POST", path, json=body, retry=False)
            else:
                async with asyncio.timeout(deadline_seconds):
                    response = await self._http.request(
                        "POST", path, json=body, retry=False, timeout=deadline_seconds
                    )
        except (BackendError, TimeoutError) as err:
            raise _endpoint_error(err, self.endpoint) from err
        try:
            return response.json()
        except ValueError as err:
            raise DecodingError(
                f"The {self.endpoint.name} answered with something that is not JSON "
                f"({describe(response)})."
            ) from err

    async def aclose(self) -> None:
        await self._http.aclose()


# A client's connections belong to the event loop that opened them, so the pool is
# kept per loop, as the backends' adapters are (backends/adapters/__init__.py).
_pools: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[OpenAIEndpoint, OpenAIClient]]
_pools = weakref.WeakKeyDictionary()


def endpoint_client(endpoint: OpenAIEndpoint) -> OpenAIClient:
    """The running event loop's pooled client for ``endpoint``, for calls on a
    question's path: each passes its deadline to :meth:`OpenAIClient.post_json`."""
    pool = _pools.setdefault(asyncio.get_running_loop(), {})
    client = pool.get(endpoint)
    if client is None:
        client = pool[endpoint] = OpenAIClient(endpoint, timeout_seconds=DEFAULT_TIMEOUT_SECONDS)
    return client


async def close_endpoints() -> None:
    """Close the running loop's pooled endpoint clients (at shutdown)."""
    pool = _pools.pop(asyncio.get_running_loop(), {})
    for client in pool.values():
        await client.aclose()


class BlockingOpenAIClient:
    """:class:`OpenAIClient` for sync code (training, commands): its own event loop, one
    pooled client, both closed when the ``with`` block ends. Not for a thread whose
    event loop is running. Off a question's path, its calls have no total deadline;
    each wait for an answer is bounded (ENDPOINT_BATCH_TIMEOUT_SECONDS by default)."""

    def __init__(
        self, endpoint: OpenAIEndpoint, *, timeout_seconds: float = ENDPOINT_BATCH_TIMEOUT_SECONDS
    ) -> None:
        self._client = OpenAIClient(endpoint, timeout_seconds=timeout_seconds)
        self._runner: asyncio.Runner | None = None

    def __enter__(self) -> BlockingOpenAIClient:
        self._runner = asyncio.Runner()
        return self

    def post_json(self, path: str, body: Any) -> Any:
        """:meth:`OpenAIClient.post_json`, waited for. Raises EndpointError."""
        if self._runner is None:
            raise RuntimeError("BlockingOpenAIClient posts inside its with block only.")
        return self._runner.run(self._client.post_json(path, body))

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        runner, self._runner = self._runner, None
        if runner is not None:
            try:
                runner.run(self._client.aclose())
            finally:
                runner.close()

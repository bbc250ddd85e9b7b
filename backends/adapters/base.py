"""The one interface every backend adapter implements, and the plain values it trades in.

Adapters know HTTP and their server's quirks; they know nothing of the ORM.
They take a :class:`BackendConfig` and return frozen dataclasses, and raise
only the typed errors of ``backends.errors``.
"""

from __future__ import annotations

import abc
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Self, TypeVar

from backends.errors import BackendError
from backends.http import HttpClient
from backends.transport import Response, Transport

_Number = TypeVar("_Number", int, float)


@dataclass(frozen=True)
class Exchange:
    """One earlier question and its answer."""

    question: str
    answer: str


@dataclass(frozen=True)
class BackendConfig:
    """What an adapter needs to reach one server. ``api_key`` never leaves the adapter.

    Without ``allow_private_addresses`` the client connects only to public
    addresses (backends/addresses.py), checked on what the name resolves to.
    """

    id: int
    name: str
    kind: str
    base_url: str
    api_key: str = field(default="", repr=False)
    timeout_seconds: float = 60.0
    allow_private_addresses: bool = False

    @property
    def cache_key(self) -> tuple[object, ...]:
        """Changes whenever anything that shapes the HTTP client changes."""
        return (
            self.id,
            self.kind,
            self.base_url,
            self.api_key,
            self.timeout_seconds,
            self.allow_private_addresses,
        )


@dataclass(frozen=True)
class HealthResult:
    ok: bool
    latency_ms: float
    error: str = ""


@dataclass(frozen=True)
class DiscoveredFlow:
    external_id: str
    name: str
    flow_type: str = ""
    deployed: bool = True
    description: str = ""
    endpoint_name: str = ""


@dataclass(frozen=True)
class Usage:
    """What one run cost in tokens, as the backend reported it, summed over its LLM calls.

    A figure the backend did not report is None, never 0: a flow without an LLM
    has no usage at all (``usage=None`` on the result), and a server may report
    some counts and omit others. ``cost`` is set only when the server itself
    reports one (Flowise prices tokens from its own model list, in US dollars).
    """

    prompt_tokens: int | None
    completion_tokens: int | None
    total_tokens: int | None
    cost: float | None = None

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            _add(self.prompt_tokens, other.prompt_tokens),
            _add(self.completion_tokens, other.completion_tokens),
            _add(self.total_tokens, other.total_tokens),
            _add(self.cost, other.cost),
        )


def _add(a: _Number | None, b: _Number | None) -> _Number | None:
    """The sum of two figures: a missing one adds nothing, and two missing stay None, not 0."""
    if a is None:
        return b
    if b is None:
        return a
    return a + b


def sum_usage(usages: Iterable[Usage | None]) -> Usage | None:
    """The total of several LLM calls' usage; None when none of them reported any."""
    total: Usage | None = None
    for usage in usages:
        if usage is not None:
            total = usage if total is None else total + usage
    return total


def token_count(value: Any) -> int | None:
    """A token count from a reply: a non-negative whole number, else None."""
    # bool is an int to Python, and JSON numbers may arrive as 8.0.
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if value < 0 or value != int(value):
        return None
    return int(value)


def money(value: Any) -> float | None:
    """A cost from a reply: a non-negative number, else None."""
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        return None
    return float(value)


@dataclass(frozen=True)
class ExecutionResult:
    """A flow's answer. ``usage`` is None when the backend reported no token usage."""

    text: str
    session_id: str
    metadata: Mapping[str, Any] = field(default_factory=dict)
    usage: Usage | None = None


@dataclass(frozen=True)
class StreamEvent:
    """One event of a streamed answer, the same shape for every backend kind.

    ``chunk`` events carry text in ``text``; the single ``end`` event carries
    the whole answer in ``text``, the backend's session id, and the run's
    token usage when the backend reported any (``usage`` is None otherwise).
    """

    type: Literal["chunk", "end"]
    text: str = ""
    session_id: str = ""
    metadata: Mapping[str, Any] = field(default_factory=dict)
    usage: Usage | None = None


class FlowBackend(abc.ABC):
    """An adapter for one backend server. Every call is async and raises BackendError."""

    kind: str

    def __init__(self, config: BackendConfig, http: HttpClient) -> None:
        self.config = config
        self.http = http

    @staticmethod
    @abc.abstractmethod
    def map_error(response: Response, backend: str) -> BackendError:
        """Turn the server's error response into the right typed error."""

    @staticmethod
    @abc.abstractmethod
    def auth_headers(api_key: str) -> dict[str, str]:
        """The headers that carry the backend's API key, in the server's own way."""

    @classmethod
    def build(cls, config: BackendConfig, transport: Transport | None = None) -> Self:
        """An adapter with its own pooled client (tests pass a mock transport)."""
        http = HttpClient(
            base_url=config.base_url,
            backend_name=config.name,
            error_mapper=cls.map_error,
            headers=cls.auth_headers(config.api_key) if config.api_key else {},
            timeout_seconds=config.timeout_seconds,
            transport=transport,
            restricted=not config.allow_private_addresses,
        )
        return cls(config, http)

    @abc.abstractmethod
    async def health_check(self) -> HealthResult:
        """Probe the server cheaply (no flow runs, nothing billed); never raises.

        The error is Flywheel's description of what went wrong, never the reply's body.
        """

    @abc.abstractmethod
    async def discover_flows(self) -> list[DiscoveredFlow]:
        """Every flow on the server, one request per page."""

    @abc.abstractmethod
    async def execute_flow(
        self,
        flow_id: str,
        question: str,
        *,
        session_id: str | None = None,
        parameters: Mapping[str, Any] | None = None,
        history: Sequence[Exchange] = (),
    ) -> ExecutionResult:
        """Run a flow and return its answer.

        ``history`` holds earlier exchanges of the conversation that this
        backend has not seen (the session moved here from another backend).
        """

    @abc.abstractmethod
    def stream_flow(
        self,
        flow_id: str,
        question: str,
        *,
        session_id: str | None = None,
        parameters: Mapping[str, Any] | None = None,
        history: Sequence[Exchange] = (),
    ) -> AsyncIterator[StreamEvent]:
        """Run a flow, yielding text chunks and then one end event."""

    async def aclose(self) -> None:
        await self.http.aclose()

"""The one interface every backend adapter implements, and the plain values it trades in.

Adapters know HTTP and their server's quirks; they know nothing of the ORM.
They take a :class:`BackendConfig` and return frozen dataclasses, and raise
only the typed errors of ``backends.errors``.
"""

from __future__ import annotations

import abc
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Self

from backends.errors import BackendError
from backends.http import HttpClient
from backends.transport import Response, Transport


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
class ExecutionResult:
    text: str
    session_id: str
    metadata: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class StreamEvent:
    """One event of a streamed answer, the same shape for every backend kind.

    ``chunk`` events carry text in ``text``; the single ``end`` event carries
    the whole answer in ``text`` and the backend's session id.
    """

    type: Literal["chunk", "end"]
    text: str = ""
    session_id: str = ""
    metadata: Mapping[str, Any] = field(default_factory=dict)


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

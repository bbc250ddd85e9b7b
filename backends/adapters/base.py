"""The one interface every backend adapter implements, and the plain values it trades in.

Adapters know HTTP and their server's quirks; they know nothing of the ORM.
They take a :class:`BackendConfig` and return frozen dataclasses, and raise
only the typed errors of ``backends.errors``. What a kind cannot do (types,
deployment, a generator) it declares in class attributes; asking for it is a
BackendUnsupportedError raised here, before any call to the server.
"""

from __future__ import annotations

import abc
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, Self, TypeVar

from backends.adapters.discovery import Discovery, FlowsPage, discover, too_many_flows
from backends.adapters.records import FlowRecord, record_problem
from backends.adapters.traits import Tunable, unapplied
from backends.errors import BackendError, BackendUnsupportedError
from backends.http import HttpClient, Response, Transport
from backends.http.limits import discovery_max_flows

_Number = TypeVar("_Number", int, float)

DEFAULT_FLOW_TYPE = "CHATFLOW"  # seed 003's type of a new flow when none is asked for
UNTYPED = "FLOW"  # the type every flow of a kind without flow types shows


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


def timestamp(value: Any) -> str | None:
    """A record's date as the server wrote it, or None when it has none."""
    return str(value) if value else None


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
    """An adapter for one backend server. Every call is async and raises BackendError
    (or, for what its kind cannot do, BackendUnsupportedError before any call)."""

    kind: ClassVar[str]
    label: ClassVar[str]  # the kind's name as people read it: "Flowise"
    # What the kind can do besides running flows. Without flow types every flow shows
    # as UNTYPED and a new one takes only the default type; without deployment every
    # flow can run; without a generator generate_flow refuses.
    flow_types: ClassVar[tuple[str, ...]] = ()
    deployable: ClassVar[bool] = False
    generates: ClassVar[bool] = False

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

    async def discover_flows(self) -> Discovery:
        """Every flow on the server, a page at a time, within the discovery limits: the
        flows Flywheel can keep, and the records it skipped (backends/adapters/discovery.py).

        Raises BackendUnexpectedError past a limit (``failure: too_large``).
        """
        return await discover(self, self._flows_page)

    @abc.abstractmethod
    async def _flows_page(self, number: int) -> FlowsPage:
        """Page ``number`` (from 1) of the server's flow list, one request; a server that
        does not paginate answers its whole list as page 1, the last."""

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

    untuned_reason: ClassVar[str] = "has no node that takes it"  # for an answer's warnings

    @classmethod
    def tuned(cls, parameters: Mapping[str, Any] | None, tunable: Tunable) -> dict[str, Any]:
        """``parameters`` as a flow of this kind whose nodes take ``tunable`` (traits.py)
        receives them; a sampling parameter none takes is left out (the answer says so)."""
        left_out = set(unapplied(parameters, tunable))
        return {k: v for k, v in (parameters or {}).items() if k not in left_out}

    # --- what the kind can do -------------------------------------------------------

    @classmethod
    def shown_type(cls, flow_type: str) -> str:
        """The type a flow of this kind shows, from the type Flywheel stored for it."""
        return (flow_type or DEFAULT_FLOW_TYPE) if cls.flow_types else UNTYPED

    @classmethod
    def unsupported(cls, backend: str, operation: str) -> BackendUnsupportedError:
        """The error for asking ``backend``, of this kind, for what its kind cannot do."""
        return BackendUnsupportedError(
            label=cls.label, kind=cls.kind, backend=backend, operation=operation
        )

    def _no_deployment(self) -> BackendUnsupportedError:
        return self.unsupported(self.config.name, f"deployment (every {self.label} flow can run)")

    # --- managing flows (seed 003) -------------------------------------------------

    async def list_flows(self) -> list[FlowRecord]:
        """Every flow on the server, in one read (discover_flows pages through them).

        Each record is checked as get_flow's are; more than discovery takes
        (FLYWHEEL_DISCOVERY_MAX_FLOWS) is a BackendUnexpectedError.
        """
        records = await self._list_flows()
        limit = discovery_max_flows()
        if len(records) > limit:
            raise too_many_flows(self, limit)
        return [self.checked(record) for record in records]

    async def get_flow(self, flow_id: str) -> FlowRecord:
        """One flow, with its definition; a record that does not fit what Flywheel keeps
        and shows is a BackendUnexpectedError naming the field (checked())."""
        return self.checked(await self._get_flow(flow_id))

    def checked(self, record: FlowRecord) -> FlowRecord:
        """``record``, if every field fits (backends/adapters/records.py); else raises
        BackendUnexpectedError (502) naming the backend and the field."""
        problem = record_problem(record)
        if problem is None:
            return record
        error = problem.error(label=self.label, backend=self.config.name)
        raise self.http.clean_error(error)

    @abc.abstractmethod
    async def _list_flows(self) -> list[FlowRecord]:
        """The server's whole flow list, in one read."""

    @abc.abstractmethod
    async def _get_flow(self, flow_id: str) -> FlowRecord:
        """The server's record of one flow, with its definition."""

    async def create_flow(
        self,
        *,
        name: str,
        flow_data: Mapping[str, Any],
        flow_type: str = DEFAULT_FLOW_TYPE,
        deployed: bool | None = None,
    ) -> FlowRecord:
        """Create a flow (``deployed`` None: the server's default).

        Raises BackendUnsupportedError, before any call, for a type other than
        the default on a kind without flow types, and for ``deployed=False``
        on a kind without deployment.
        """
        if flow_type != DEFAULT_FLOW_TYPE and not self.flow_types:
            raise self.unsupported(self.config.name, f"flow types ({flow_type})")
        if deployed is False and not self.deployable:
            raise self.unsupported(
                self.config.name, f"undeployed flows (every {self.label} flow can run)"
            )
        return self.checked(
            await self._create_flow(
                name=name, flow_data=flow_data, flow_type=flow_type, deployed=deployed
            )
        )

    async def update_flow(
        self,
        flow_id: str,
        *,
        name: str | None = None,
        flow_data: Mapping[str, Any] | None = None,
        description: str | None = None,
        deployed: bool | None = None,
    ) -> FlowRecord:
        """Change what is given (None leaves a field as it is).

        Raises BackendUnsupportedError, before any call, for ``deployed`` on a
        kind without deployment.
        """
        if deployed is not None and not self.deployable:
            raise self._no_deployment()
        return self.checked(
            await self._update_flow(
                flow_id, name=name, flow_data=flow_data, description=description, deployed=deployed
            )
        )

    async def deploy_flow(self, flow_id: str, deployed: bool = True) -> FlowRecord:
        """Deploy (or undeploy) a flow: an update of ``deployed`` alone."""
        return await self.update_flow(flow_id, deployed=deployed)

    @abc.abstractmethod
    async def delete_flow(self, flow_id: str) -> None:
        """Delete a flow; one the server does not have is a BackendNotFoundError."""

    async def generate_flow(
        self, description: str, chat_model: Mapping[str, Any]
    ) -> dict[str, Any]:
        """A new flow's definition (``{"nodes", "edges"}``) that the server's generator
        made from ``description`` with ``chat_model``; nothing is stored.

        A kind without a generator (``generates`` False) raises BackendUnsupportedError.
        """
        raise self.unsupported(self.config.name, "generating flows")

    @abc.abstractmethod
    async def _create_flow(
        self, *, name: str, flow_data: Mapping[str, Any], flow_type: str, deployed: bool | None
    ) -> FlowRecord:
        """The server's create, once create_flow has refused what the kind cannot do."""

    @abc.abstractmethod
    async def _update_flow(
        self,
        flow_id: str,
        *,
        name: str | None,
        flow_data: Mapping[str, Any] | None,
        description: str | None,
        deployed: bool | None,
    ) -> FlowRecord:
        """The server's update, once update_flow has refused what the kind cannot do."""

    async def aclose(self) -> None:
        await self.http.aclose()

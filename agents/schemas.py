"""What each MCP tool returns: the models its outputSchema is built from.

They describe the bodies the services already return (the REST doors answer
the same ones), so a tool passes a service's dict through unchanged. Fields
are typed where a client relies on them; nested free-form parts (a query
type's evidence, health details) stay objects. Extra keys a service adds
later are let through: validation ignores them and the published schemas do
not forbid them.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field


class ErrorInfo(BaseModel):
    """The inside of the one error shape: ``{"error": {type, message, details}}``."""

    type: str
    message: str
    details: dict[str, Any] = Field(default_factory=dict)


# --- routing ------------------------------------------------------------------------


class Candidate(BaseModel):
    backend: str
    kind: str
    flow: str
    flow_id: str = Field(description="The flow's id on its backend.")
    score: float
    match: float
    health: float
    performance: float
    tokens: float = Field(
        description="Token usage factor: 1 - mean tokens / the policy's ceiling; 0.5 unknown."
    )
    generic: bool


class Attempt(BaseModel):
    backend: str
    flow: str
    ok: bool
    latency_ms: float | None
    error_type: str | None
    error: str | None


class Routing(BaseModel):
    """Why this flow answered (seed 000's routing metadata)."""

    intent: str
    intent_confidence: float
    method: str = Field(
        description="How the intent was found: rules, context, example, model, llm or override."
    )
    evidence: list[str]
    query_type: dict[str, Any] | None
    routing_method: str = Field(description="auto (intelligent), explicit, or local.")
    backend: str | None
    flow: str | None
    score: float | None
    candidates: list[Candidate]
    fallback_used: bool
    fallback_chain: list[Attempt]
    cached: bool
    timings: dict[str, float]


class QueryAnswer(BaseModel):
    """universal_query: the answer, its session and request ids, and (by default) why."""

    answer: str
    session_id: str
    request_id: str
    routing: Routing | None = Field(
        default=None, description="Present unless include_routing_metadata is false."
    )
    trace_url: str


class RoutePlan(BaseModel):
    """route_query: the dry run (nothing runs, nothing is recorded)."""

    question: str
    intent: str
    confidence: float
    method: str
    evidence: list[str]
    query_type: str | None
    query_type_confidence: float | None
    candidates: list[Candidate]
    selected: Candidate | None
    error: ErrorInfo | None = Field(description="Why nothing could be selected, if so.")


class Prediction(BaseModel):
    """run_prediction: seed 003's output plus Flywheel's ids and routing."""

    text: str
    sessionId: str  # seed 003's camelCase names, as Flowise spells them
    request_id: str
    trace_url: str
    routing: Routing | None = None


# --- backends and flows ----------------------------------------------------------------


class BackendShown(BaseModel):
    """A backend as GET /api/v1/backends shows it: a shared one by id, name, kind and
    health only; one of the caller's own with its settings too. Never its API key."""

    id: int
    name: str
    kind: str
    shared: bool
    health: dict[str, Any] | None
    base_url: str | None = None
    has_api_key: bool | None = None
    enabled: bool | None = None
    timeout_seconds: float | None = None
    weight: float | None = None


class HealthOutcome(BaseModel):
    backend: str
    ok: bool
    latency_ms: float | None
    error: str
    in_cooldown: bool


class FlowShown(BaseModel):
    """A discovered flow as GET /api/v1/flows shows it."""

    id: int = Field(description="Flywheel's id for the flow.")
    backend: str
    backend_id: int
    external_id: str = Field(description="The flow's id on its backend.")
    name: str
    flow_type: str
    deployed: bool
    description: str
    endpoint_name: str
    intent_keywords: list[str]
    scope: str
    is_generic: bool
    last_seen_at: str


# --- the chatflow lifecycle (seed 003) ---------------------------------------------------


class _Where(BaseModel):
    backend: str = Field(description="The backend the flow is on.")
    backend_id: int
    kind: str = Field(description="flowise or langflow.")


class ChatflowSummary(_Where):
    id: str = Field(description="The flow's id on its backend.")
    name: str
    type: str = Field(description="CHATFLOW, AGENTFLOW, MULTIAGENT, ASSISTANT; Langflow: FLOW.")
    deployed: bool
    description: str
    flow_id: int = Field(description="Flywheel's id for the flow.")
    intent_keywords: list[str]
    last_seen_at: str


class Chatflow(_Where):
    id: str = Field(description="The flow's id on its backend.")
    name: str
    type: str = Field(description="CHATFLOW, AGENTFLOW, MULTIAGENT, ASSISTANT; Langflow: FLOW.")
    deployed: bool
    description: str
    createdDate: str | None  # seed 003's camelCase names
    updatedDate: str | None
    flow_id: int = Field(description="Flywheel's id for the flow.")


class ChatflowWithData(Chatflow):
    flowData: str | None = Field(
        description="The workflow structure (nodes and edges) as a JSON string."
    )


class Deleted(BaseModel):
    message: str
    deleted_id: str


class Generated(BaseModel):
    flowData: str = Field(description="Generated workflow structure as a JSON string.")
    name: str = Field(description="Suggested chatflow name.")
    description: str
    backend: str = Field(description="The Flowise backend that generated it.")


# --- sessions -------------------------------------------------------------------------


class SessionTurn(BaseModel):
    question: str
    answer: str
    intent: str
    backend: str | None
    flow: str | None
    created_at: str


class SessionHistory(BaseModel):
    id: str
    created_at: str
    updated_at: str
    turns: list[SessionTurn]


class SessionSummary(BaseModel):
    id: str
    created_at: str
    updated_at: str
    first_question: str
    preview: str  # the start of its last answer
    turn_count: int

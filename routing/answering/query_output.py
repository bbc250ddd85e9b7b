"""What the query doors answer: one declaration per shape, for every door.

The services build these bodies as dicts (the hot path does not build models to
send them); the models below declare them, and the OpenAPI schema
(routing/openapi.py) and the MCP tools' output schemas (agents/) are drawn from
them. Fields are typed where a client relies on them; extra keys a service adds
later are let through (a validation ignores them and the schemas do not forbid
them).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, Field

from flywheel.errors import ErrorInfo
from routing.models import IntentMethod

Uuid = Annotated[str, Field(json_schema_extra={"format": "uuid"})]
QueryTypeName = Literal["GLOBAL", "LOCAL", "HYBRID"]


class Candidate(BaseModel):
    """A flow that could answer, with its scores."""

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
    success: float = Field(description="Estimated chance of an answer (posterior mean).")
    success_margin: float = Field(description="Two standard deviations of that estimate.")
    typical_ms: float = Field(description="Estimated typical time to an answer.")
    attempts: float = Field(description="Recent attempts behind the estimate (age-weighted).")
    expected_seconds: float = Field(
        description="Expected time to an answer when tried first, a failure counted at the "
        "policy's failure cost: candidates are tried in increasing order of it."
    )


class Attempt(BaseModel):
    """One flow tried along the fallback chain."""

    backend: str
    flow: str
    ok: bool
    latency_ms: float | None
    error_type: str | None = Field(
        description="What ended a failed attempt; Cancelled: a hedged attempt stopped because "
        "the other answered first."
    )
    error: str | None
    hedged: bool = Field(
        default=False,
        description="Started while the attempt before it still ran (the policy's hedging); "
        "present only when true.",
    )


class QueryTypeDecision(BaseModel):
    """How broad the question is: GLOBAL (corpus-wide), LOCAL (one thing) or HYBRID."""

    query_type: QueryTypeName
    confidence: float
    reasoning: str
    global_weight: float
    local_weight: float
    method: Literal["rules", "model", "llm", "fallback"]
    evidence: dict[str, list[str]] = Field(
        default_factory=dict, description="The patterns that matched, by scope."
    )


class Evidence(BaseModel):
    """Why the question got its intent: in words, and the raw matches behind them."""

    summary: str = Field(
        description="In words, e.g. \"matched 'review' and 'pull request' (code-review "
        'rules 1 and 3)" or "the learned model (v4): 0.91 code-review, 0.05 '
        'technical-analysis"; empty when there is nothing to say (an intent the caller '
        "named says so)."
    )
    raw: list[str] = Field(description="The patterns that matched, or the step's own note.")


class Routing(BaseModel):
    """Why this flow answered (seed 000's routing metadata)."""

    intent: str
    intent_confidence: float
    method: IntentMethod = Field(description="How the intent was found.")
    evidence: Evidence
    query_type: QueryTypeDecision | None
    routing_method: Literal["auto", "explicit", "local"] = Field(
        description="auto (intelligent), explicit (a flow was named), or local (answered "
        "from the conversation)."
    )
    backend: str | None
    flow: str | None
    score: float | None
    why: str | None = Field(description="Why the first candidate was tried first, in words.")
    candidates: list[Candidate]
    fallback_used: bool
    fallback_chain: list[Attempt]
    cached: bool
    timings: dict[str, float] = Field(description="Milliseconds per step, routing overhead too.")
    arm: str | None = Field(
        default=None,
        description="The arm of the intent's A/B split that chose the first backend; present "
        "only when a split did.",
    )


class Usage(BaseModel):
    """Tokens the answering flow's LLM calls used, as its backend reported them."""

    prompt_tokens: int | None
    completion_tokens: int | None
    total_tokens: int | None


class QueryAnswer(BaseModel):
    """The answer, its session and request ids, and (by default) why."""

    answer: str
    session_id: Uuid
    request_id: Uuid
    usage: Usage | None = Field(
        default=None, description="Present when the backend that answered reported tokens."
    )
    backend_ids: dict[str, str] | None = Field(
        default=None,
        description="The answering backend's own ids for this exchange, when it gave any "
        "(Flowise: chatId, chatMessageId, questionMessageId, executionId).",
    )
    warnings: list[str] | None = Field(
        default=None,
        description="Present when a parameter could not be applied: temperature or "
        "max_tokens that no node of the flow that answered takes.",
    )
    routing: Routing | None = Field(
        default=None, description="Present unless include_routing_metadata is false."
    )
    trace_url: str = Field(
        json_schema_extra={"format": "uri-reference"},
        description="The decision's trace page.",
    )
    session_url: str = Field(
        json_schema_extra={"format": "uri-reference"},
        description="The conversation's diagram page (seed 002's visualisation).",
    )


class StreamEvent(BaseModel):
    """One Server-Sent Event: `chunk` events (data: {"text"}), then one `end` (data: the
    JSON answer) or one `error` (data: the error shape)."""

    event: Literal["chunk", "end", "error"]
    data: str = Field(description="A JSON document.")


class RoutePlan(BaseModel):
    """The dry run: the intent and every candidate flow (nothing runs, nothing is
    recorded)."""

    question: str
    intent: str
    confidence: float
    method: IntentMethod
    evidence: Evidence
    query_type: QueryTypeName | None
    query_type_confidence: float | None
    candidates: list[Candidate]
    selected: Candidate | None
    why: str | None = Field(description="Why the selected candidate comes first, in words.")
    error: ErrorInfo | None = Field(description="Why nothing could be selected, if so.")


class QueryTypeAnswer(QueryTypeDecision):
    """A query-router decision, for the caller's tenant."""

    tenant: str = Field(description="The API key's tenant (never the caller's say-so).")
    processing_time_ms: float


class ScopePatternShown(BaseModel):
    pattern: str
    kind: str
    weight: float
    enabled: bool


class ScopePatterns(BaseModel):
    """The GLOBAL and LOCAL rules in use."""

    global_: list[ScopePatternShown] = Field(alias="global")
    local: list[ScopePatternShown]


class QueryRouterStatus(BaseModel):
    """The query router's configuration."""

    enabled: bool
    use_llm: bool
    llm_model: str | None
    confidence_threshold: float
    patterns: dict[str, int] = Field(description="How many rules each scope has.")

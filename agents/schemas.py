"""What each MCP tool returns: the models its outputSchema is built from.

They describe the bodies the services already return (the REST doors answer
the same ones; the query's and the chatflows' are the REST doors' own
declarations, routing/answering/query_output.py and chatflows/contract.py),
so a tool passes a service's dict through unchanged. Fields are typed where a
client relies on them; nested free-form parts (health details) stay objects.
Extra keys a service adds later are let through: validation ignores them and
the published schemas do not forbid them.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from routing.answering.query_output import Routing

# --- routing (universal_query and route_query answer as their REST doors declare) ---


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

"""What each MCP tool returns: the models its outputSchema is built from.

They describe the bodies the services already return, which the REST doors
answer too, so each is the REST door's own declaration: the query's and the
chatflows' models (routing/answering/query_output.py, chatflows/contract.py),
and the models of the DRF serializers that present backends, flows and
sessions (flywheel.serialized.model_of). A tool passes a service's dict
through unchanged. Extra keys a service adds later are let through:
validation ignores them and the published schemas do not forbid them. Only
run_prediction's answer is MCP's own (seed 003's names).
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from backends.api import BackendSerializer, HealthOutcomeSerializer, SharedBackendSerializer
from chatflows.api import FlowSerializer
from flywheel.serialized import model_of
from routing.answering.query_output import Routing
from routing.api import SessionSerializer, SessionSummarySerializer

# --- routing (universal_query and route_query answer as their REST doors declare) ---


class Prediction(BaseModel):
    """run_prediction: seed 003's output plus Flywheel's ids and routing."""

    text: str
    sessionId: str  # seed 003's camelCase names, as Flowise spells them
    chatMessageId: str | None = Field(default=None, description="Flowise's id of the answer.")
    questionMessageId: str | None = Field(
        default=None, description="Flowise's id of the question, when it gives one."
    )
    request_id: str
    trace_url: str
    routing: Routing | None = None


# --- backends, flows and sessions: as their REST doors' serializers declare them ---------

# A backend as GET /api/v1/backends shows it: one of the caller's own (its settings,
# never its API key), or a shared one (id, name, kind and health only).
BackendShown = model_of(BackendSerializer) | model_of(SharedBackendSerializer)
HealthOutcome = model_of(HealthOutcomeSerializer)
FlowShown = model_of(FlowSerializer)
SessionHistory = model_of(SessionSerializer)
SessionSummary = model_of(SessionSummarySerializer)

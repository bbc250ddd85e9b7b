"""The tools' argument types: their ``Field`` constraints are the published inputSchema.

Seed 000 and 003's schemas, as far as the SDK expresses them. Not expressed:
update_chatflow's top-level ``anyOf`` (at least one of name, flow_data,
deployed): Claude's API refuses anyOf/oneOf/allOf at the top of a tool's
input schema, which would drop every tool; the service refuses an update
that changes nothing instead (a ValidationError with constraint "anyOf").
"""

from __future__ import annotations

import uuid
from typing import Annotated, Any, Literal

from pydantic import Field, WithJsonSchema

from chatflows import lifecycle
from routing.answering.query_input import MAX_QUESTION

Question = Annotated[
    str,
    Field(
        min_length=1,
        max_length=MAX_QUESTION,
        description="Question or prompt to send to AI workflow. Can be multi-line.",
    ),
]
Intent = Annotated[
    str | None,
    Field(
        pattern=r"^[-a-z0-9_]{1,50}$",
        description="Optional intent override; classified automatically when left out. "
        "Examples: 'creative-orientation', 'technical-analysis', 'document-qa', "
        "'code-review', 'summarize', 'conversation-query', 'general' (an administrator "
        "may add others; an unknown one is a ValidationError).",
    ),
]
BackendChoice = Annotated[
    str,
    Field(
        min_length=1,
        max_length=lifecycle.MAX_BACKEND,
        description="'auto' (default) routes by intent, health and performance; a kind "
        "('flowise', 'langflow') or a backend's name or id forces that backend.",
    ),
]
SessionId = Annotated[
    uuid.UUID | None,
    Field(description="Continue a conversation: the session_id of an earlier answer."),
]
# Seed 000's schema, published as it is; the values are checked by the query's own
# validation (routing/answering/query_input.py), which also takes Flowise/Langflow extras
# (tweaks, ...).
PARAMETERS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "Flow-specific parameters to customize execution",
    "properties": {
        "temperature": {
            "type": "number",
            "minimum": 0.0,
            "maximum": 2.0,
            "description": "LLM temperature (0=deterministic, 2=creative)",
        },
        "max_tokens": {
            "type": "integer",
            "minimum": 1,
            "description": "Maximum tokens in response",
        },
        "stream": {
            "type": "boolean",
            "description": "Ignored over MCP: the answer comes whole.",
        },
    },
}
Parameters = Annotated[dict[str, Any] | None, WithJsonSchema(PARAMETERS_SCHEMA)]
FlowRef = Annotated[
    str | None,
    Field(
        min_length=1,
        max_length=lifecycle.MAX_FLOW_ID,
        description="Run this flow (Flywheel's flow id, or the backend's own id for it) "
        "instead of choosing one.",
    ),
]
Fallback = Annotated[
    bool, Field(description="With flow: may other flows answer if it fails (default false).")
]
ChatflowId = Annotated[
    str,
    Field(
        min_length=1,
        max_length=lifecycle.MAX_FLOW_ID,
        description="The flow's id on its backend (or Flywheel's flow_id).",
    ),
]
OnBackend = Annotated[
    str | None,
    Field(
        min_length=1,
        max_length=lifecycle.MAX_BACKEND,
        description="The backend (id or name); needed when the id is on several, or for a "
        "flow made on the backend a moment ago.",
    ),
]
Name = Annotated[
    str, Field(min_length=1, max_length=lifecycle.MAX_NAME, description="Chatflow name")
]
FlowData = Annotated[
    str,
    Field(
        min_length=1,
        description="JSON string containing workflow structure (nodes and edges), under 1 MB",
    ),
]
ChatflowType = Literal["CHATFLOW", "AGENTFLOW", "MULTIAGENT", "ASSISTANT"]

"""The chatflow lifecycle's requests and answers (seed 003), each declared once.

The REST doors (chatflows/chatflow_api.py) take the bodies below, their
OpenAPI (chatflows/openapi.py) and the MCP chatflow tools' schemas (agents/)
are drawn from them, and the MCP tools' arguments are typed with the field
types below, so the SDK refuses what the schemas refuse. The values are
checked by the lifecycle itself (chatflows/lifecycle.py), whichever door they
came through, and refused there in seed 003's words (``details.field`` and
``details.constraint``); the bounds here are its own.
"""

from __future__ import annotations

from typing import Annotated, Literal, Required

from pydantic import BaseModel, ConfigDict, Field, with_config
from typing_extensions import TypedDict

from backends.contract import registered_kinds
from chatflows.lifecycle import (
    FLOW_ID,
    MAX_BACKEND,
    MAX_DESCRIPTION,
    MAX_FLOW_ID,
    MAX_NAME,
    MIN_DESCRIPTION,
)
from flywheel.contract import NOT_BLANK, PY_SPACE, Contract

# As lifecycle.CHATFLOW_TYPES, in its order (tests/agents/test_tools.py holds them equal).
ChatflowType = Literal["CHATFLOW", "AGENTFLOW", "MULTIAGENT", "ASSISTANT"]

ChatflowId = Annotated[
    str,
    Field(
        min_length=1,
        max_length=MAX_FLOW_ID,
        pattern=f"^{FLOW_ID.pattern}$",
        description="The flow's id on its backend (or Flywheel's flow_id).",
    ),
]
BackendName = Annotated[str, Field(min_length=1, max_length=MAX_BACKEND)]
OnBackend = Annotated[
    BackendName | None,
    Field(
        description="The backend (id or name); needed when the id is on several, or for a "
        "flow made on the backend a moment ago."
    ),
]
ChatflowName = Annotated[
    str,
    Field(min_length=1, max_length=MAX_NAME, pattern=NOT_BLANK, description="Chatflow name."),
]
FlowData = Annotated[
    str,
    Field(
        min_length=1,
        description="The workflow's structure: a JSON string (under 1 MB) of an object "
        "holding `nodes` and `edges` lists.",
    ),
]
Deployed = Annotated[bool, Field(description="true to deploy, false to undeploy.")]
AgentflowDescription = Annotated[
    str,
    Field(
        min_length=MIN_DESCRIPTION,
        max_length=MAX_DESCRIPTION,
        # At least MIN_DESCRIPTION characters once trimmed, as the lifecycle counts them.
        pattern=f"^[{PY_SPACE}]*[^{PY_SPACE}][\\s\\S]{{{MIN_DESCRIPTION - 2},}}"
        f"[^{PY_SPACE}][{PY_SPACE}]*$",
        description="Natural language description of the desired agent behavior.",
    ),
]


# --- requests -----------------------------------------------------------------------


class ChatflowCreate(Contract):
    """A new flow, on one of the caller's own backends (``?backend=`` picks which)."""

    name: ChatflowName
    flow_data: FlowData
    type: Annotated[ChatflowType, Field(description="Chatflow type (Flowise).")] = "CHATFLOW"
    deployed: Annotated[
        bool | None,
        Field(description="Deploy at once (Flowise; default false). Langflow flows always run."),
    ] = None


# A change names only what it changes: a field is left out, never null (the lifecycle
# takes a null for "unchanged", but a change of nulls alone changes nothing: refused).
_CHANGE = ConfigDict(strict=True, extra="forbid", json_schema_extra={"minProperties": 1})


@with_config(_CHANGE)
class ChatflowUpdate(TypedDict, total=False):
    """A change to a flow: its name, flowData or deployment (at least one)."""

    name: ChatflowName
    flow_data: FlowData
    deployed: Deployed


@with_config(_CHANGE)
class ChatflowReplace(TypedDict, total=False):
    """A flow's name and flowData replaced (deployment too, if given)."""

    name: Required[ChatflowName]
    flow_data: Required[FlowData]
    deployed: Deployed


class ChatflowDeploy(Contract):
    """Deploy or undeploy (Flowise); no body deploys."""

    deployed: Deployed = True


class AgentflowRequest(Contract):
    """A description to generate an AgentFlow V2 from (on a shared Flowise)."""

    description: AgentflowDescription


# --- answers ------------------------------------------------------------------------


class _Flow(BaseModel):
    id: str = Field(description="The flow's id on its backend.")
    name: str
    type: Literal["CHATFLOW", "AGENTFLOW", "MULTIAGENT", "ASSISTANT", "FLOW"] = Field(
        description="Flowise's chatflow type; a Langflow flow is FLOW."
    )
    deployed: bool
    description: str
    backend: str = Field(description="The backend the flow is on.")
    backend_id: int
    kind: str = Field(
        description="The backend's kind, one of the adapter registry's.",
        json_schema_extra=registered_kinds,
    )
    flow_id: int = Field(description="Flywheel's id for the flow.")


class ChatflowListed(_Flow):
    """A flow as Flywheel knows it (kept by discovery and by every write through it)."""

    intent_keywords: list[str]
    last_seen_at: str = Field(json_schema_extra={"format": "date-time"})


class Chatflow(_Flow):
    """A flow as its backend has it."""

    createdDate: str | None  # seed 003's camelCase names
    updatedDate: str | None


class ChatflowWithData(Chatflow):
    """A flow as its backend has it, with its workflow structure."""

    flowData: str | None = Field(
        description="The workflow structure (nodes and edges) as a JSON string."
    )


class Deleted(BaseModel):
    message: str
    deleted_id: str


class Generated(BaseModel):
    """An AgentFlow V2, ready for a create."""

    flowData: str = Field(description="Generated workflow structure as a JSON string.")
    name: str = Field(description="Suggested chatflow name.")
    description: str
    backend: str = Field(description="The Flowise backend that generated it.")

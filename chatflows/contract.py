"""The chatflow lifecycle's requests and answers (seed 003), each declared once.

The REST doors (chatflows/chatflow_api.py) take the bodies below, their
OpenAPI (chatflows/openapi.py) and the MCP chatflow tools' schemas (agents/)
are drawn from them, and the MCP tools' arguments are typed with the field
types below. Each field's type carries its rule and the words that refuse it
(seed 003's ``details.field``, ``details.constraint`` and ``details.value``):
the lifecycle (chatflows/lifecycle.py) checks every value it is given with
these types, whichever door it came through, so nothing checks them twice.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal, Required

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, with_config
from typing_extensions import TypedDict

from backends.adapters.records import FLOW_ID, ID_CHARS
from backends.contract import registered_kinds
from flywheel.contract import NOT_BLANK, PY_SPACE, Contract, Says, fault_details, refuse
from flywheel.errors import ValidationError
from flywheel.jsonin import string_problem

CHATFLOW_TYPES = ("CHATFLOW", "AGENTFLOW", "MULTIAGENT", "ASSISTANT")
MAX_NAME = 255
MAX_FLOW_DATA_BYTES = 1_000_000
MIN_DESCRIPTION = 10
MAX_DESCRIPTION = 10_000
MAX_FLOW_ID = ID_CHARS  # as Flow.external_id
MAX_BACKEND = 100


def invalid(field: str, message: str, constraint: str, value: Any = None) -> ValidationError:
    """A refusal in seed 003's shape, for what no field's type can tell (which backend
    a flow goes to, an update that changes nothing): the field, the constraint and
    (shortly) the value, as the fields below refuse theirs."""
    return ValidationError(
        message, details={**fault_details(field, value, constraint), "fields": {field: message}}
    )


# --- the fields, each with its rule and the words that refuse it (seed 003) ---------------


def _text(message: str, constraint: str) -> AfterValidator:
    """The value trimmed, if it is text (no NUL, no lone surrogate); else refused."""

    def check(value: str) -> str:
        if problem := string_problem(value):
            raise refuse(message.format(problem=problem), constraint, shown=None)
        return value.strip()

    return AfterValidator(check)


def _flow_data(value: str) -> str:
    """A JSON string under 1 MB of an object holding ``nodes`` and ``edges`` lists."""
    if len(value.encode("utf-8", "surrogatepass")) >= MAX_FLOW_DATA_BYTES:
        raise refuse("flow_data must be under 1 MB.", "maxSize", "(too large)")
    try:
        data = json.loads(value)
    except json.JSONDecodeError as err:
        raise refuse(f"flow_data is not valid JSON: {err.msg}.", "json", "(not JSON)") from err
    except (ValueError, RecursionError) as err:  # a number too long, nesting too deep
        raise refuse("flow_data is not valid JSON.", "json", "(not JSON)") from err
    if not isinstance(data, dict):
        raise refuse("flow_data must be a JSON object.", "object", "(not an object)")
    missing = [k for k in ("nodes", "edges") if not isinstance(data.get(k), list)]
    if missing:
        raise refuse(
            f"flow_data must hold {' and '.join(missing)} as lists.",
            "nodesAndEdges",
            "(missing " + ", ".join(missing) + ")",
        )
    return value


def _backend_named(value: Any) -> Any:
    """An id or a name, trimmed; absent or blank once trimmed (``?backend=`` sent empty,
    as allowEmptyValue permits) names none."""
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    if isinstance(value, str):
        return value.strip() or None
    if value is not None:
        raise refuse("backend must be a backend's id or name.", "type")
    return value


NAME_RULE = f"Chatflow name must be between 1 and {MAX_NAME} characters."
FLOW_ID_RULE = (
    f"chatflow_id must be a flow's id: 1-{MAX_FLOW_ID} letters, digits, '-', '_', '.' "
    "or ':', starting with a letter or digit."
)
BACKEND_RULE = f"backend must be a backend's id or name (1-{MAX_BACKEND} characters)."
DESCRIPTION_RULE = f"Describe the flow in at least {MIN_DESCRIPTION} characters."
DESCRIPTION_TOO_LONG = Says(
    f"The description must be text of at most {MAX_DESCRIPTION} characters.",
    constraint="maxLength",
    shown=None,
)

# As CHATFLOW_TYPES, in its order (tests/agents/test_tools.py holds them equal).
ChatflowType = Annotated[
    Literal["CHATFLOW", "AGENTFLOW", "MULTIAGENT", "ASSISTANT"],
    Says(f"type must be one of {', '.join(CHATFLOW_TYPES)}.", constraint="enum"),
]

ChatflowId = Annotated[
    str,
    Field(
        min_length=1,
        max_length=MAX_FLOW_ID,
        pattern=f"^{FLOW_ID.pattern}$",
        description="The flow's id on its backend (or Flywheel's flow_id).",
    ),
    Says(FLOW_ID_RULE, constraint="format"),
]
BackendName = Annotated[
    str,
    Field(min_length=1, max_length=MAX_BACKEND),
    _text(BACKEND_RULE, "format"),
]
OnBackend = Annotated[
    BackendName | None,
    BeforeValidator(_backend_named),
    Field(
        description="The backend (id or name); needed when the id is on several, or for a "
        "flow made on the backend a moment ago."
    ),
    Says(BACKEND_RULE, constraint="format"),
]
ChatflowName = Annotated[
    str,
    Field(min_length=1, max_length=MAX_NAME, pattern=NOT_BLANK, description="Chatflow name."),
    Says(NAME_RULE, constraint="length"),
    _text("Chatflow name must be text: it {problem}.", "text"),
]
FlowData = Annotated[
    str,
    Field(
        min_length=1,
        description="The workflow's structure: a JSON string (under 1 MB) of an object "
        "holding `nodes` and `edges` lists.",
    ),
    Says("flow_data must be a JSON string.", constraint="type", shown="(not a string)"),
    AfterValidator(_flow_data),
]
Deployed = Annotated[
    bool,
    Field(description="true to deploy, false to undeploy."),
    Says("deployed must be true or false.", constraint="type"),
]
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
    Says(
        DESCRIPTION_RULE, constraint="minLength", by_type={"string_too_long": DESCRIPTION_TOO_LONG}
    ),
    _text(DESCRIPTION_TOO_LONG.message, "maxLength"),
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

    createdDate: str | None = Field(
        description="When the backend says it created the flow (None: it does not say)."
    )
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

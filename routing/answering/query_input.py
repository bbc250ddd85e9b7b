"""The universal query's input: one contract for every door.

:class:`QueryRequest` is the query as the fast lane, the DRF and chat doors, the
MCP tools and the ``ask`` and ``route`` commands take it (each through
:func:`query_request`), and as the OpenAPI schema and the MCP tools' input
schemas show it (routing/openapi.py, agents/). In short: ``question``
1-10000 characters, not all blank; ``intent`` a slug of 1-50 characters
``[-a-z0-9_]``; ``backend`` 1-100 characters; ``session_id`` a UUID (kept in
canonical form); ``parameters`` an object of plain JSON under 20000 bytes,
nested at most 32 levels counting the query itself; ``flow`` a flow to run
(Flywheel's Flow id, or the backend's own id for it: 1-200 characters); ``fallback``
true or false (may others answer if the flow or backend named fails; by default a
backend falls back and a flow does not); ``history`` at most 20 earlier exchanges
(``question`` up to 2,000 characters and ``answer`` up to 8,000) of a conversation
the caller keeps itself, not with ``session_id``; no other field. No string may hold
a NUL character or a lone surrogate, whichever door it came through (the REST doors'
JSON parser refuses them first).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping
from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    BeforeValidator,
    ConfigDict,
    Field,
    TypeAdapter,
    WrapValidator,
    with_config,
)
from pydantic import ValidationError as PydanticError
from pydantic_core import InitErrorDetails
from typing_extensions import TypedDict

from chatflows.contract import FLOW_ID, MAX_FLOW_ID
from chatflows.filters import INTENT_RULE, IntentSlug
from flywheel.contract import NOT_BLANK, Contract, NullIs, Says, pick, refuse, validated
from flywheel.errors import ValidationError
from flywheel.jsonin import LONE_SURROGATE, json_problem, string_problem

MAX_QUESTION = 10_000
MAX_BACKEND = 100
MAX_PARAMETERS_BYTES = 20_000
# A caller's history: the newest exchanges, each within these characters. A flow gets at
# most FLYWHEEL_HISTORY_BUDGET_CHARS of it (32,000 by default), and the largest valid
# query, every character escaped in its JSON, stays within the request body's limit.
MAX_HISTORY = 20  # exchanges
MAX_HISTORY_QUESTION = 2_000
MAX_HISTORY_ANSWER = 8_000
HISTORY_RULE = (
    f"Must be a list of at most {MAX_HISTORY} earlier exchanges, oldest first, each "
    f'{{"question": text of up to {MAX_HISTORY_QUESTION} characters, "answer": text of up '
    f"to {MAX_HISTORY_ANSWER}}}."
)
SESSION_ID_RULE = "Must be a UUID returned by an earlier answer."
# A session id as answers give it (and the schema's "uuid" format): 8-4-4-4-12 hex digits.
SESSION_ID = "^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$"
QUESTION_RULE = "Required: a non-empty string."
BACKEND_RULE = "Must be 'auto' or a backend's name, kind or id."
FLOW_RULE = (
    "Must be a flow's id: Flywheel's (a number) or its backend's "
    f"(1-{MAX_FLOW_ID} letters, digits, '-', '_', '.' or ':')."
)
NOT_TEXT = f"Must be text: it {LONE_SURROGATE}."  # pydantic's own check finds lone surrogates


def _stripped_text(rule: str | None = None) -> AfterValidator:
    """``value`` without surrounding whitespace, if it is text (no NUL character);
    else refused with ``rule``, or with what is wrong with it."""

    def check(value: str) -> str:
        problem = string_problem(value)
        if problem:
            raise refuse(rule or f"Must be text: it {problem}.")
        return value.strip()

    return AfterValidator(check)


def _not_blank(rule: str) -> BeforeValidator:
    """Refuse a blank string with ``rule`` before its length is looked at."""

    def check(value: Any) -> Any:
        if isinstance(value, str) and not value.strip():
            raise refuse(rule)
        return value

    return BeforeValidator(check)


def _strip(value: Any) -> Any:
    return value.strip() if isinstance(value, str) else value


# A flow as a query names it: Flywheel's id (a number), or its backend's id for it.
FlowRef = Annotated[int, Field(ge=0)] | Annotated[str, Field(pattern=f"^{FLOW_ID.pattern}$")]
_FLOW_REF: TypeAdapter[int | str] = TypeAdapter(FlowRef, config=ConfigDict(strict=True))


def _flow_text(value: Any) -> str | None:
    """The flow named, as text (Flywheel's ids too)."""
    return None if value is None else str(_FLOW_REF.validate_python(value))


def _canonical_uuid(value: str) -> str:
    return str(uuid.UUID(value))


@with_config(ConfigDict(extra="allow", strict=True))
class Parameters(TypedDict, total=False):
    """Passed to the backend (``stream`` aside). Present means typed as declared: a
    null is refused, not taken for "absent"."""

    temperature: Annotated[
        float,
        Field(ge=0, le=2, description="LLM temperature (0=deterministic, 2=creative)."),
        Says("Must be a number from 0 to 2."),
    ]
    max_tokens: Annotated[
        int,
        Field(ge=1, description="Maximum tokens in the answer."),
        Says("Must be a positive integer."),
    ]
    stream: Annotated[
        bool,
        Field(description="Answer as Server-Sent Events (REST); over MCP the answer comes whole."),
        Says("Must be true or false."),
    ]
    tweaks: Annotated[
        dict[Any, Any],  # its keys are checked with the whole (_parameters_problem)
        Field(description="Langflow's tweaks, per component, passed through."),
        Says("Must be an object (Langflow's tweaks, per component)."),
    ]


_TYPED = tuple(Parameters.__annotations__)


def _parameters_problem(parameters: dict[str, Any]) -> str | None:
    # Checked where it sits in a query, so the depth counts as it does in a REST body.
    problem = json_problem({"parameters": parameters})
    if problem is not None:  # from a door that did not parse JSON (a command, a tool)
        path, reason = problem
        return f"{path.removeprefix('$.')[:100]} {reason}."
    try:
        size = len(json.dumps(parameters, allow_nan=False))
    except (TypeError, ValueError):
        return "Must be plain JSON."
    if size > MAX_PARAMETERS_BYTES:
        return f"Must be under {MAX_PARAMETERS_BYTES} bytes of JSON."
    return None


def _parameters(value: Any, typed: Any) -> dict[str, Any]:
    """The parameters as given (numbers keep their JSON type), once their typed fields
    are checked and the whole is plain JSON within bounds; both faults are named."""
    if not isinstance(value, dict):
        return typed(value)  # refused: not an object
    whole = _parameters_problem(value)
    try:
        # Only the declared fields: the others are any JSON, checked with the whole.
        typed({name: value[name] for name in _TYPED if name in value})
    except PydanticError as err:
        if whole is None:
            raise
        raise PydanticError.from_exception_data(
            err.title, [*_again(err), {"type": refuse(whole), "loc": (), "input": value}]
        ) from err
    if whole is not None:
        raise refuse(whole)
    return dict(value)


def _again(err: PydanticError) -> list[InitErrorDetails]:
    """``err``'s errors, to raise again beside another."""
    again: list[InitErrorDetails] = []
    for e in err.errors(include_url=False):
        detail: InitErrorDetails = {"type": e["type"], "loc": e["loc"], "input": e["input"]}
        if "ctx" in e:
            detail["ctx"] = e["ctx"]
        again.append(detail)
    return again


@with_config(ConfigDict(extra="forbid", strict=True))
class GivenExchange(TypedDict):
    """An earlier exchange of a conversation the caller keeps itself."""

    question: Annotated[str, Field(max_length=MAX_HISTORY_QUESTION), _stripped_text()]
    answer: Annotated[str, Field(max_length=MAX_HISTORY_ANSWER), _stripped_text()]


class QueryRequest(Contract):
    """A question to answer (or, at /api/v1/route, to route without answering)."""

    refused_message = "The query is not valid."
    unknown_fields = "unknown_fields"
    # The one rule between fields, in the schema too: history, or a session, not both.
    model_config = ConfigDict(
        json_schema_extra={
            "not": {
                "required": ["history", "session_id"],
                "properties": {
                    "history": {"type": "array", "minItems": 1},
                    "session_id": {"type": "string"},
                },
            }
        }
    )

    question: Annotated[
        str,
        Field(
            min_length=1,
            max_length=MAX_QUESTION,
            pattern=NOT_BLANK,
            description="Question or prompt to send to AI workflow. Can be multi-line.",
        ),
        _not_blank(QUESTION_RULE),
        _stripped_text(),
        Says(
            QUESTION_RULE,
            by_type={
                "string_too_long": f"At most {MAX_QUESTION} characters.",
                "string_unicode": NOT_TEXT,
            },
        ),
    ]
    intent: Annotated[
        IntentSlug | None,
        Field(
            description="Skip classification: use this intent. Examples: "
            "'creative-orientation', 'technical-analysis', 'document-qa', 'code-review', "
            "'summarize', 'conversation-query', 'general' (an administrator may add others; "
            "an unknown or disabled one is a ValidationError)."
        ),
        Says(INTENT_RULE),
    ] = None
    backend: Annotated[
        str,
        Field(
            min_length=1,
            max_length=MAX_BACKEND,
            pattern=NOT_BLANK,
            description="'auto' (the default) routes by intent, health and performance; a "
            "kind ('flowise', 'langflow') or a backend's name or id forces that backend.",
        ),
        BeforeValidator(_strip),
        _stripped_text(BACKEND_RULE),
        NullIs("auto"),
        Says(BACKEND_RULE),
    ] = "auto"
    session_id: Annotated[
        Annotated[
            str,
            Field(pattern=SESSION_ID, json_schema_extra={"format": "uuid"}),
            AfterValidator(_canonical_uuid),
        ]
        | None,
        Field(description="Continue a conversation: the session_id of an earlier answer."),
        Says(SESSION_ID_RULE),
    ] = None
    parameters: Annotated[
        Parameters,
        WrapValidator(_parameters),
        NullIs({}),
        Field(
            description="Flow-specific parameters, passed to the backend "
            f"(under {MAX_PARAMETERS_BYTES} bytes of JSON)."
        ),
        Says("Must be an object."),
    ] = Field(default_factory=Parameters)
    include_routing_metadata: Annotated[
        bool,
        Field(description="Include routing decision metadata (default true)."),
        Says("Must be true or false."),
    ] = True
    flow: Annotated[
        str | None,
        BeforeValidator(_flow_text, json_schema_input_type=FlowRef | None),
        Field(
            description="Run this flow (Flywheel's id, or its backend's) instead of choosing "
            "one: routing method 'explicit'; 404 if the key cannot see it, 400 if it is not "
            "deployed."
        ),
        Says(FLOW_RULE),
    ] = None
    fallback: Annotated[
        bool | None,
        Field(
            description="If the flow or backend named fails, may others answer? By default a "
            "named backend falls back to the others, and a named flow does not."
        ),
        Says("Must be true or false."),
    ] = None

    history: Annotated[
        list[GivenExchange],
        Field(
            max_length=MAX_HISTORY,
            description="The conversation so far, for a caller that keeps it itself (as "
            "OpenAI-style clients do): earlier exchanges, oldest first. Used to classify a "
            "follow-up and sent to the flow as the conversation. Not with session_id.",
        ),
        NullIs([]),
        Says(HISTORY_RULE),
    ] = Field(default_factory=list)

    @property
    def stream(self) -> bool:
        return bool(self.parameters.get("stream"))

    @property
    def falls_back(self) -> bool:
        """``fallback``, or its default: a named backend falls back, a named flow not."""
        return self.fallback if self.fallback is not None else self.flow is None


def query_request(data: Any) -> QueryRequest:
    """Validate a query's input (the contract above).

    Returns a QueryRequest with the question and backend stripped and the
    session id in canonical form. Raises ValidationError listing every bad
    field under ``details.fields``.
    """
    if isinstance(data, Mapping) and not isinstance(data, dict):
        data = dict(data)
    request = validated(QueryRequest, data)
    if request.history and request.session_id is not None:
        raise ValidationError(
            QueryRequest.refused_message,
            details={
                "fields": {
                    "history": "Not with session_id: a session keeps its own history. "
                    "Send one or the other."
                }
            },
        )
    return request


class QueryTypeRequest(Contract):
    """The question of a query-router call (seed 004): ``{"query"}`` and nothing else.

    The tenant comes from the caller's API key, so a ``tenant_id`` (or any
    other field) in the body is refused, never trusted (AC 8).
    """

    refused_message = "The query is not valid."

    query: Annotated[
        str,
        Field(min_length=1, max_length=MAX_QUESTION, pattern=NOT_BLANK),
        _stripped_text(f"Required: 1-{MAX_QUESTION} characters of text."),
        Says(f"Required: 1-{MAX_QUESTION} characters of text."),
    ]


def query_type_request(data: Any) -> str:
    """The stripped question of a query-router body. Raises ValidationError."""
    return validated(QueryTypeRequest, data).query


# POST /api/v1/chatflows/{id}/predict: a query whose flow is in the path (and backend in
# ?backend=); run_flow validates it as a QueryRequest.
PredictRequest = pick(
    QueryRequest,
    "PredictRequest",
    "question",
    "session_id",
    "fallback",
    "include_routing_metadata",
    doc="A question for the flow in the path (routed, recorded and measured like any).",
)

"""An OpenAI Chat Completions request, as the OpenAI-compatible door takes it.

The messages become a universal query (routing/answering/query_input.py): the
last message, the user's, is the question; the exchanges before it are the
conversation the caller keeps (``history``), sent to whichever flow answers (a
user message no answer followed is an exchange without an answer; the newest
20 exchanges, each question cut to 2,000 characters and answer to 8,000).
System and developer messages are not sent (a flow has its own prompt), nor
are sampling options no flow takes (``top_p``, ``stop``, ...): the answer's
``flywheel.warnings`` says so. What
Flywheel cannot do is refused: tool calls, content that is not text, more than
one choice. ``temperature`` and ``max_tokens`` (or ``max_completion_tokens``)
go to the flow as parameters.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, NotRequired

from pydantic import ConfigDict, Field, with_config
from typing_extensions import TypedDict

from chatflows.filters import IntentSlug
from dialects.extension import renamed_refusal
from flywheel.contract import NOT_BLANK, Contract, Says, validated
from flywheel.errors import ValidationError
from routing.answering.query_input import (
    MAX_BACKEND,
    MAX_HISTORY,
    MAX_HISTORY_ANSWER,
    MAX_HISTORY_QUESTION,
    QueryRequest,
    query_request,
)

MAX_MESSAGES = 1_000
MAX_MODEL = 256
TEXT_ONLY = "Flywheel's flows take text: a content part must be {'type': 'text', 'text': ...}."
ROLES = "Must be 'system', 'developer', 'user' or 'assistant' (tool messages are not supported)."
# Sampling options no flow takes: accepted, left out, and said so in the answer's warnings.
NOT_PASSED = (
    "top_p",
    "frequency_penalty",
    "presence_penalty",
    "seed",
    "stop",
    "logit_bias",
    "metadata",
    "store",
    "service_tier",
    "reasoning_effort",
    "parallel_tool_calls",
)


@with_config(ConfigDict(extra="forbid", strict=True))
class TextPart(TypedDict):
    type: Literal["text"]
    text: str


@with_config(ConfigDict(extra="forbid", strict=True))
class Message(TypedDict):
    role: Annotated[Literal["system", "developer", "user", "assistant"], Says(ROLES)]
    content: NotRequired[Annotated[str | list[TextPart] | None, Says(TEXT_ONLY)]]
    name: NotRequired[str]
    refusal: NotRequired[str | None]


@with_config(ConfigDict(extra="forbid", strict=True))
class StreamOptions(TypedDict, total=False):
    include_usage: bool
    include_obfuscation: bool


@with_config(ConfigDict(extra="forbid", strict=True))
class FlywheelOptions(TypedDict, total=False):
    """Flywheel's own options (``extra_body={"flywheel": {...}}`` in OpenAI's SDK): as the
    universal query's fields of the same names."""

    intent: IntentSlug
    backend: Annotated[str, Field(min_length=1, max_length=MAX_BACKEND, pattern=NOT_BLANK)]
    fallback: bool


class OpenAIRequest(Contract):
    """What OpenAI's Chat Completions and Responses requests share (the parts Flywheel
    can serve): the model, streaming, temperature, Flywheel's own options, and options
    no flow takes (accepted, left out, named in the warnings)."""

    refused_message = "The request is not valid."

    model: Annotated[
        str,
        Field(min_length=1, max_length=MAX_MODEL, description="'flywheel', or a flow's model."),
        Says("Required: 'flywheel' (routed by intent) or a model from GET /v1/models."),
    ]
    stream: Annotated[bool | None, Says("Must be true or false.")] = None
    temperature: Annotated[
        float | None, Field(ge=0, le=2), Says("Must be a number from 0 to 2.")
    ] = None
    flywheel: Annotated[
        FlywheelOptions | None,
        Says("Must be an object: intent, backend, fallback."),
    ] = None
    top_p: Any = None
    metadata: Any = None
    store: Any = None
    service_tier: Any = None


class ChatRequest(OpenAIRequest):
    """POST /v1/chat/completions, as OpenAI documents it (the parts Flywheel can serve)."""

    messages: Annotated[
        list[Message],
        Field(min_length=1, max_length=MAX_MESSAGES),
        Says(f"Required: 1-{MAX_MESSAGES} messages, each with a role and text content."),
    ]
    stream_options: Annotated[StreamOptions | None, Says("Must be an object.")] = None
    max_tokens: Annotated[int | None, Field(ge=1), Says("Must be a positive integer.")] = None
    max_completion_tokens: Annotated[
        int | None, Field(ge=1), Says("Must be a positive integer.")
    ] = None
    user: Annotated[str | None, Field(max_length=256), Says("At most 256 characters.")] = None
    n: Annotated[int | None, Field(ge=1, le=1), Says("Flywheel gives one choice: n must be 1.")] = (
        None
    )
    frequency_penalty: Any = None
    presence_penalty: Any = None
    seed: Any = None
    stop: Any = None
    logit_bias: Any = None
    reasoning_effort: Any = None
    parallel_tool_calls: Any = None


def chat_request(data: Any) -> ChatRequest:
    """Validate a Chat Completions body. Raises ValidationError naming each bad field."""
    return validated(ChatRequest, data)


def _text(message: Message) -> str:
    content = message.get("content")
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return "".join(part["text"] for part in content)


def _refused(field: str, message: str) -> ValidationError:
    return ValidationError(ChatRequest.refused_message, details={"fields": {field: message}})


def conversation(
    messages: list[Message], field: str = "messages"
) -> tuple[str, list[dict[str, str]], bool]:
    """The question (the last message, the user's), the exchanges before it, and whether
    system or developer messages were left out. A user message no answer followed is
    an exchange without an answer. Raises ValidationError (on ``field``) if the last
    message is not the user's."""
    if messages[-1]["role"] != "user":
        raise _refused(field, "The last message must be the user's: it is the question.")
    history: list[dict[str, str]] = []
    asked: str | None = None
    instructions = False
    for message in messages[:-1]:
        role, text = message["role"], _text(message)
        if role in ("system", "developer"):
            instructions = True
        elif role == "user":
            if asked is not None:
                history.append({"question": asked, "answer": ""})
            asked = text
        else:  # an answer: it closes the exchange the user's message before it opened
            history.append({"question": asked or "", "answer": text[:MAX_HISTORY_ANSWER]})
            asked = None
    if asked is not None:
        history.append({"question": asked, "answer": ""})
    for exchange in history:
        exchange["question"] = exchange["question"][:MAX_HISTORY_QUESTION]
    return _text(messages[-1]), history[-MAX_HISTORY:], instructions


def chat_query(
    chat: ChatRequest, *, flow: int | None, backend: str | None
) -> tuple[QueryRequest, list[str]]:
    """The universal query ``chat`` asks (for ``flow`` on ``backend``, or routed), and the
    warnings of what it leaves out. Raises ValidationError, naming the chat's fields."""
    return messages_query(
        chat.messages,
        temperature=chat.temperature,
        max_tokens=chat.max_completion_tokens or chat.max_tokens,
        options=chat.flywheel or {},
        left_out=[name for name in NOT_PASSED if getattr(chat, name) is not None],
        flow=flow,
        backend=backend,
    )


def messages_query(
    messages: list[Message],
    *,
    temperature: float | None,
    max_tokens: int | None,
    options: FlywheelOptions,
    left_out: list[str],
    flow: int | None,
    backend: str | None,
    field: str = "messages",
) -> tuple[QueryRequest, list[str]]:
    """The universal query a conversation of OpenAI messages asks, and the warnings of
    what it leaves out (``left_out``: options given that no flow takes). ``field``: the
    request's name for the messages, in errors."""
    question, history, instructions = conversation(messages, field)
    parameters: dict[str, Any] = {}
    if temperature is not None:
        parameters["temperature"] = temperature
    if max_tokens is not None:
        parameters["max_tokens"] = max_tokens
    data: dict[str, Any] = {
        "question": question,
        "history": history,
        "parameters": parameters,
        "intent": options.get("intent"),
    }
    if flow is not None:
        data.update(flow=flow, backend=backend, fallback=options.get("fallback", False))
    elif "backend" in options:
        data["backend"] = options["backend"]
    try:
        query = query_request(data)
    except ValidationError as err:  # the query's fields, as the chat's
        names = {"question": field, "history": field}
        raise renamed_refusal(err, ChatRequest.refused_message, names) from err
    warnings = []
    if instructions:
        warnings.append("System and developer messages are not sent: a flow keeps its own prompt.")
    if left_out:
        warnings.append(f"Not passed to flows, which do not take them: {', '.join(left_out)}.")
    return query, warnings

"""What the dialects' doors answer, as models: their OpenAPI schema is drawn from them
(dialects/openapi.py), and their tests read the answers through the clients' own SDKs."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field


class Flywheel(BaseModel):
    """What Flywheel did for the answer: never in the answer's text."""

    request_id: str
    session_id: str
    intent: str | None
    backend: str | None
    flow: str | None
    fallback_used: bool
    trace_url: str = Field(description="The decision's trace page.")
    session_url: str = Field(description="The conversation's diagram page.")
    warnings: list[str] = Field(description="What the request asked that was not passed on.")


class ChatMessage(BaseModel):
    role: Literal["assistant"]
    content: str
    refusal: str | None


class Choice(BaseModel):
    index: int
    message: ChatMessage
    finish_reason: Literal["stop"]
    logprobs: dict[str, Any] | None


class CompletionUsage(BaseModel):
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int


class ChatCompletion(BaseModel):
    """A chat completion, as OpenAI's API gives it, with the ``flywheel`` field."""

    id: str
    object: Literal["chat.completion"]
    created: int
    model: str
    choices: list[Choice]
    usage: CompletionUsage | None = Field(
        description="Present when the backend that answered reported tokens."
    )
    system_fingerprint: str | None
    flywheel: Flywheel


class OutputText(BaseModel):
    type: Literal["output_text"]
    text: str
    annotations: list[Any]


class OutputMessage(BaseModel):
    type: Literal["message"]
    id: str
    status: Literal["completed"]
    role: Literal["assistant"]
    content: list[OutputText]


class ResponseUsage(BaseModel):
    input_tokens: int
    input_tokens_details: dict[str, int]
    output_tokens: int
    output_tokens_details: dict[str, int]
    total_tokens: int


class TextResponse(BaseModel):
    """A response of the Responses API: one assistant message of one text part."""

    id: str
    object: Literal["response"]
    created_at: int
    status: Literal["completed"]
    model: str
    output: list[OutputMessage]
    usage: ResponseUsage | None = Field(
        description="Present when the backend that answered reported tokens."
    )
    error: dict[str, Any] | None
    incomplete_details: dict[str, Any] | None
    instructions: str | None
    metadata: dict[str, Any]
    parallel_tool_calls: bool
    temperature: float | None
    tool_choice: Literal["none"]
    tools: list[Any]
    top_p: float | None
    flywheel: Flywheel


class ResponseEvent(BaseModel):
    """One Server-Sent Event of a streamed response: ``event`` is its type
    (``response.created``, ``response.output_text.delta``, ... ``response.completed``,
    or ``error``), ``data`` the JSON of the event."""

    event: str
    data: str = Field(description="A JSON document with its type and sequence_number.")


class Model(BaseModel):
    id: str
    object: Literal["model"]
    created: int
    owned_by: str


class ModelList(BaseModel):
    object: Literal["list"]
    data: list[Model]


class OpenAIErrorBody(BaseModel):
    message: str
    type: str
    param: str | None
    code: str | None
    flywheel: dict[str, Any] = Field(description="The error in Flywheel's own shape.")


class OpenAIError(BaseModel):
    """An error, in OpenAI's shape."""

    error: OpenAIErrorBody


class ChunkEvent(BaseModel):
    """One Server-Sent Event of a streamed completion: ``data`` is a
    ``chat.completion.chunk``, an error in OpenAI's shape, or ``[DONE]`` last."""

    event: Literal["message"] = "message"
    data: str = Field(description="A JSON document, or [DONE].")


class FlowiseAnswer(BaseModel):
    """A prediction, as Flowise answers it, with the ``flywheel`` field."""

    text: str
    question: str
    chatId: str
    chatMessageId: str
    sessionId: str
    flywheel: Flywheel


class FlowiseError(BaseModel):
    """An error, in Flowise's shape, with Flywheel's own beside it."""

    statusCode: int
    success: Literal[False]
    message: str
    error: dict[str, Any] = Field(description="The error in Flywheel's own shape.")


class FlowiseStreaming(BaseModel):
    isStreaming: bool


class LangflowRun(BaseModel):
    """A run, as Langflow answers it (the answer's text at
    ``outputs[0].outputs[0].results.message.text``), with the ``flywheel`` field."""

    session_id: str
    outputs: list[dict[str, Any]]
    flywheel: Flywheel


class LangflowError(BaseModel):
    """An error, in Langflow's shape, with Flywheel's own beside it."""

    detail: str
    error: dict[str, Any] = Field(description="The error in Flywheel's own shape.")

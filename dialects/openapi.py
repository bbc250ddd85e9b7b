"""OpenAPI for the OpenAI-compatible door, drawn from its request and answer models.

A drf-spectacular post-processing hook (SPECTACULAR_SETTINGS), run before the
hook that adds Flywheel's error shape everywhere: this door's errors take
OpenAI's shape, so they are set here first.
"""

from __future__ import annotations

from typing import Any

from dialects.chat_request import ChatRequest
from dialects.chat_response import ChatCompletion, ModelList, OpenAIError
from flywheel.openapi import operation
from flywheel.schemas import openapi_schema

STREAM_EXAMPLE = (
    'data: {"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": '
    '{"content": "Hello"}}]}\n\ndata: [DONE]\n\n'
)
_ERRORS = {
    "400": "Not valid: a field, or what Flywheel cannot serve (tools, images, n > 1).",
    "401": "No API key, or not a valid one.",
    "404": "No such model, or no flow serves the question.",
    "413": "The request body is over the limit (FLYWHEEL_MAX_BODY_BYTES).",
    "415": "Not sent as JSON.",
    "429": "Too many requests for this key: see Retry-After.",
    "502": "Every backend that could answer failed.",
    "503": "A dependency Flywheel needs is down: try again.",
}


ERROR_REF = {"$ref": "#/components/schemas/OpenAIError"}


def _with_errors(built: dict[str, Any], statuses: tuple[str, ...]) -> dict[str, Any]:
    error = {"content": {"application/json": {"schema": ERROR_REF}}}
    for status in statuses:
        built["responses"][status] = {"description": _ERRORS[status], **error}
    built["tags"] = ["openai"]
    return built


def add_openai_endpoints(
    result: dict[str, Any], generator: Any, request: Any, public: bool
) -> dict[str, Any]:
    """drf-spectacular post-processing hook: document the OpenAI-compatible door."""
    paths = result.setdefault("paths", {})
    schemas = result.setdefault("components", {}).setdefault("schemas", {})
    schemas["OpenAIError"] = openapi_schema(OpenAIError)
    chat = operation(
        "openai_chat_completions_create",
        "A chat completion, OpenAI-compatible (Server-Sent Events when stream is true)",
        openapi_schema(ChatCompletion),
        openapi_schema(ChatRequest),
    )
    chat["responses"]["200"]["content"]["text/event-stream"] = {
        "schema": {"type": "string"},
        "example": STREAM_EXAMPLE,
    }
    paths["/v1/chat/completions"] = {
        "post": _with_errors(chat, ("400", "401", "404", "413", "415", "429", "502", "503"))
    }
    models = operation(
        "openai_models_list",
        "The models: 'flywheel' (routed), and one per flow the key may run",
        openapi_schema(ModelList),
        None,
    )
    paths["/v1/models"] = {"get": _with_errors(models, ("401", "429", "503"))}
    return result

"""OpenAPI for the dialects' doors, drawn from their request and answer models.

A drf-spectacular post-processing hook (SPECTACULAR_SETTINGS), run before the
hook that adds Flywheel's error shape everywhere: these doors' errors take their
dialect's shape, so they are set here first.
"""

from __future__ import annotations

from typing import Any

from dialects.chat_request import ChatRequest
from dialects.flowise_api import PredictionRequest
from dialects.langflow_api import RunRequest
from dialects.openai_responses import ResponsesRequest
from dialects.responses import (
    ChatCompletion,
    ChunkEvent,
    FlowiseAnswer,
    FlowiseError,
    FlowiseStreaming,
    LangflowError,
    LangflowRun,
    ModelList,
    OpenAIError,
    ResponseEvent,
    TextResponse,
)
from flywheel.openapi import operation
from flywheel.schemas import openapi_schema

STREAM_EXAMPLE = (
    'data: {"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": '
    '{"content": "Hello"}}]}\n\ndata: [DONE]\n\n'
)
_ERRORS = {
    "400": "Not valid: a field, or what Flywheel cannot serve (tools, images, n > 1).",
    "401": "No API key, or not a valid one.",
    "404": "No such model or flow, or no flow serves the question.",
    "413": "The request body is over the limit (FLYWHEEL_MAX_BODY_BYTES).",
    "415": "Not sent as JSON.",
    "429": "Too many requests for this key: see Retry-After.",
    "502": "Every backend that could answer failed.",
    "503": "A dependency Flywheel needs is down: try again.",
}


def _with_errors(
    built: dict[str, Any],
    statuses: tuple[str, ...],
    error: str = "OpenAIError",
    tag: str = "openai",
) -> dict[str, Any]:
    shape = {"content": {"application/json": {"schema": {"$ref": f"#/components/schemas/{error}"}}}}
    for status in statuses:
        built["responses"][status] = {"description": _ERRORS[status], **shape}
    built["tags"] = [tag]
    return built


def add_openai_endpoints(
    result: dict[str, Any], generator: Any, request: Any, public: bool
) -> dict[str, Any]:
    """drf-spectacular post-processing hook: document the OpenAI-compatible door."""
    paths = result.setdefault("paths", {})
    schemas = result.setdefault("components", {}).setdefault("schemas", {})
    schemas["OpenAIError"] = openapi_schema(OpenAIError)
    schemas["FlowiseError"] = openapi_schema(FlowiseError)
    chat = operation(
        "openai_chat_completions_create",
        "A chat completion, OpenAI-compatible (Server-Sent Events when stream is true)",
        openapi_schema(ChatCompletion),
        openapi_schema(ChatRequest),
    )
    chat["responses"]["200"]["content"]["text/event-stream"] = {
        "schema": openapi_schema(ChunkEvent),
        "example": STREAM_EXAMPLE,
    }
    paths["/v1/chat/completions"] = {
        "post": _with_errors(chat, ("400", "401", "404", "413", "415", "429", "502", "503"))
    }
    text = operation(
        "openai_responses_create",
        "A response, OpenAI's Responses API in its text form (events when stream is true)",
        openapi_schema(TextResponse),
        openapi_schema(ResponsesRequest),
    )
    text["responses"]["200"]["content"]["text/event-stream"] = {
        "schema": openapi_schema(ResponseEvent)
    }
    paths["/v1/responses"] = {
        "post": _with_errors(text, ("400", "401", "404", "413", "415", "429", "502", "503"))
    }
    models = operation(
        "openai_models_list",
        "The models: 'flywheel' (routed), and one per flow the key may run",
        openapi_schema(ModelList),
        None,
    )
    paths["/v1/models"] = {"get": _with_errors(models, ("401", "429", "503"))}
    _add_flowise(paths)
    _add_langflow(paths)
    schemas["LangflowError"] = openapi_schema(LangflowError)
    result["components"].setdefault("securitySchemes", {})["LangflowKey"] = {
        "type": "apiKey",
        "in": "header",
        "name": "x-api-key",
    }
    return result


FLOW = {
    "name": "flow",
    "in": "path",
    "required": True,
    "schema": {"type": "string", "minLength": 1, "maxLength": 200},
    "description": "The flow: its Flowise id, Flywheel's id, or its name.",
}


def _add_flowise(paths: dict[str, Any]) -> None:
    predict = operation(
        "flowise_prediction_create",
        "Flowise's prediction API (Flowise's event stream when streaming is true)",
        openapi_schema(FlowiseAnswer),
        openapi_schema(PredictionRequest),
    )
    predict["parameters"] = [FLOW]
    predict["responses"]["200"]["content"]["text/event-stream"] = {
        "schema": openapi_schema(ChunkEvent),
        "example": 'message:\ndata:{"event": "token", "data": "Hello"}\n\n',
    }
    statuses = ("400", "401", "404", "413", "415", "429", "502", "503")
    paths["/compat/flowise/api/v1/prediction/{flow}"] = {
        "post": _with_errors(predict, statuses, "FlowiseError", "flowise")
    }
    streaming = operation(
        "flowise_chatflows_streaming_retrieve",
        "Whether a flow streams (always: Flowise's client asks, without a key)",
        openapi_schema(FlowiseStreaming),
        None,
        tag="flowise",
    )
    streaming["parameters"] = [FLOW]
    streaming.pop("security")
    paths["/compat/flowise/api/v1/chatflows-streaming/{flow}"] = {
        "get": _with_errors(streaming, ("404",), "FlowiseError", "flowise")
    }


def _add_langflow(paths: dict[str, Any]) -> None:
    run = operation(
        "langflow_run_create",
        "Langflow's run API (Langflow's event stream with ?stream=true)",
        openapi_schema(LangflowRun),
        openapi_schema(RunRequest),
    )
    run["parameters"] = [
        {**FLOW, "description": "The flow: its Langflow id, Flywheel's id, or its name."},
        {
            "name": "stream",
            "in": "query",
            "required": False,
            "schema": {"type": "boolean", "default": False},
            "description": "Answer as Langflow's event stream.",
        },
    ]
    run["security"] = [{"ApiKey": []}, {"LangflowKey": []}]
    run["responses"]["200"]["content"]["text/event-stream"] = {
        "schema": {"type": "string"},
        "example": '{"event": "token", "data": {"chunk": "Hello"}}\n\n',
    }
    statuses = ("400", "401", "404", "413", "415", "429", "502", "503")
    paths["/compat/langflow/api/v1/run/{flow}"] = {
        "post": _with_errors(run, statuses, "LangflowError", "langflow")
    }

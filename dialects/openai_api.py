"""The OpenAI-compatible door: ``POST /v1/chat/completions`` and ``GET /v1/models``.

An application that calls OpenAI's API reaches Flywheel by changing its base URL
(``http://flywheel/v1``) and its key (a Flywheel API key, as ``Bearer``). Each
completion is a universal query (dialects/chat_request.py) answered by routing's
one service, so it is classified, routed, recorded and rate-limited as on every
other door. Flywheel's routing shows beside the answer, never in it: in the
``flywheel`` field (intent, backend, flow, request, session, trace, warnings) and
in ``X-Flywheel-*`` headers. Errors take OpenAI's shape,
``{"error": {"message", "type", "param", "code"}}``.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

from django.http import HttpRequest, JsonResponse, StreamingHttpResponse
from django.http.response import HttpResponseBase

from dialects.catalog import OWNER, ROUTED, flow_models, model_named
from dialects.chat_request import ChatRequest, chat_query, chat_request
from dialects.extension import dialect_error_response, flywheel_field, routing_headers
from flywheel.asyncapi import async_api, json_body
from flywheel.errors import ApplicationError
from flywheel.models import ApiKey
from routing.answering.service import answer_question, query_refused, stream_answer
from routing.selection.state import current_state

# Flywheel's error types as OpenAI's: (type, code). Any other is a server_error.
_OPENAI_ERRORS = {
    "ValidationError": ("invalid_request_error", None),
    "UnsupportedMediaType": ("invalid_request_error", None),
    "BadRequest": ("invalid_request_error", None),
    "AuthenticationError": ("invalid_request_error", "invalid_api_key"),
    "PermissionDenied": ("permission_error", None),
    "NotFoundError": ("invalid_request_error", "model_not_found"),
    "MethodNotAllowed": ("invalid_request_error", None),
    "RateLimitError": ("rate_limit_error", "rate_limit_exceeded"),
}


def openai_error(body: dict[str, Any]) -> dict[str, Any]:
    """Flywheel's error shape in OpenAI's words: the first bad field is the ``param``,
    and Flywheel's own type and details stay under ``flywheel``."""
    error = body["error"]
    kind, code = _OPENAI_ERRORS.get(error["type"], ("server_error", None))
    fields = error.get("details", {}).get("fields") or {}
    param, message = next(iter(fields.items()), (None, None))
    text = f"{error['message']} {param}: {message}" if param else error["message"]
    return {
        "error": {
            "message": text,
            "type": kind,
            "param": param,
            "code": code or error["type"],
            "flywheel": error,
        }
    }


def openai_error_response(err: ApplicationError) -> JsonResponse:
    return dialect_error_response(err, openai_error)


def _usage(body: dict[str, Any]) -> dict[str, int] | None:
    usage = body.get("usage")
    if not usage:
        return None
    return {
        name: usage.get(name) or 0
        for name in ("prompt_tokens", "completion_tokens", "total_tokens")
    }


async def _query(request: HttpRequest, api_key: ApiKey) -> tuple[ChatRequest, Any, list[str]]:
    chat = chat_request(json_body(request))
    model = model_named(await current_state(), api_key.tenant_id, chat.model)
    query, warnings = chat_query(
        chat,
        flow=model.flow_id if model else None,
        backend=str(model.backend_id) if model else None,
    )
    return chat, query, warnings


@async_api("POST", on_rate_limited=query_refused, error=openai_error_response)
async def chat_completions(request: HttpRequest, api_key: ApiKey) -> HttpResponseBase:
    """POST /v1/chat/completions: a chat completion (Server-Sent Events with stream)."""
    chat, query, warnings = await _query(request, api_key)
    if chat.stream:
        response = StreamingHttpResponse(
            _chunks(request, chat, stream_answer(query, tenant=api_key.tenant), warnings),
            content_type="text/event-stream",
        )
        response["Cache-Control"] = "no-cache"
        response["X-Accel-Buffering"] = "no"
        return response
    body = await answer_question(query, tenant=api_key.tenant)
    flywheel = flywheel_field(request, body, warnings)
    completion: dict[str, Any] = {
        "id": f"chatcmpl-{body['request_id']}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": chat.model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": body["answer"], "refusal": None},
                "finish_reason": "stop",
                "logprobs": None,
            }
        ],
        "usage": _usage(body),
        "system_fingerprint": None,
        "flywheel": flywheel,
    }
    return JsonResponse(completion, headers=routing_headers(flywheel))


def _sse(data: dict[str, Any]) -> str:
    return f"data: {json.dumps(data)}\n\n"


async def _chunks(
    request: HttpRequest,
    chat: ChatRequest,
    events: AsyncIterator[dict[str, Any]],
    warnings: list[str],
) -> AsyncIterator[str]:
    """The answer's events as OpenAI's chunks: the role first, the text as it comes,
    then an empty delta with the finish reason and the ``flywheel`` field, the usage
    chunk if asked for, and ``[DONE]``. A failure is an ``error`` chunk, then ``[DONE]``."""
    created = int(time.time())
    head = {"object": "chat.completion.chunk", "created": created, "model": chat.model}
    chunk_id = f"chatcmpl-{uuid.uuid4()}"  # the request's id comes last, with the routing

    def chunk(delta: dict[str, Any], finish: str | None = None, **more: Any) -> str:
        choice = {"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}
        return _sse({"id": chunk_id, **head, "choices": [choice], **more})

    started = False
    async for event in events:
        name = event.pop("event")
        if name == "error":
            yield _sse(openai_error(event))
            break
        if not started:
            yield chunk({"role": "assistant", "content": ""})
            started = True
        if name == "chunk":
            yield chunk({"content": event["text"]})
        elif name == "end":
            flywheel = flywheel_field(request, event, warnings)
            yield chunk({}, "stop", flywheel=flywheel)
            if (chat.stream_options or {}).get("include_usage"):
                yield _sse({"id": chunk_id, **head, "choices": [], "usage": _usage(event)})
    yield "data: [DONE]\n\n"


@async_api("GET", error=openai_error_response)
async def models(request: HttpRequest, api_key: ApiKey) -> HttpResponseBase:
    """GET /v1/models: the routed model, then one per flow the key may run."""
    state = await current_state()
    listed = [{"id": ROUTED, "object": "model", "created": 0, "owned_by": OWNER}]
    for model in flow_models(state, api_key.tenant_id).values():
        listed.append({"id": model.id, "object": "model", "created": 0, "owned_by": model.backend})
    return JsonResponse({"object": "list", "data": listed})

"""Flowise's prediction API, served by Flywheel: an application that calls a Flowise
server changes only its base URL, to ``<flywheel>/compat/flowise``.

``POST /compat/flowise/api/v1/prediction/{flow}`` runs the flow (its Flowise id,
Flywheel's id, or its name) on whichever backend holds it, falling back to the
same flow on another backend (routing.selection.planning: a flow on several
backends), answered, recorded and rate-limited by routing's one service. The
body is Flowise's: ``question``, ``streaming``, ``overrideConfig`` (passed to the
flow as the query's parameters), ``history`` (``userMessage`` / ``apiMessage``)
and ``chatId``: the chatId of an earlier answer continues its conversation, any
other starts a new one, whose chatId the answer gives. Answers take Flowise's
shape (``text``, ``question``, ``chatId``, ``chatMessageId``, ``sessionId``) with
a ``flywheel`` field beside them; a stream is Flowise's (``message:`` and
``data:{"event": ..., "data": ...}``: ``token``, ``metadata``, ``end``). Errors
take Flowise's shape (``statusCode``, ``success``, ``message``) with Flywheel's
own ``error`` beside it. ``GET .../api/v1/chatflows-streaming/{flow}`` says every
flow streams, as Flowise's client asks before it streams (without a key).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Annotated, Any, Literal

from django.http import HttpRequest, JsonResponse, StreamingHttpResponse
from django.http.response import HttpResponseBase
from pydantic import ConfigDict, Field, with_config
from typing_extensions import TypedDict

from chatflows.contract import MAX_FLOW_ID
from dialects.catalog import flow_ref
from dialects.extension import (
    Question,
    dialect_error_response,
    error_text,
    flywheel_field,
    renamed_refusal,
)
from flywheel.asyncapi import async_api, json_body
from flywheel.contract import Contract, Says, validated
from flywheel.errors import (
    ApplicationError,
    MethodNotAllowedError,
    NotFoundError,
    ValidationError,
)
from flywheel.models import ApiKey
from routing.answering.query_input import query_request
from routing.answering.service import answer_question, query_refused, stream_answer
from routing.answering.sessions import session_continued
from routing.selection.state import current_state


@with_config(ConfigDict(extra="forbid", strict=True))
class FlowiseMessage(TypedDict):
    role: Literal["userMessage", "apiMessage"]
    content: str


class PredictionRequest(Contract):
    """POST /api/v1/prediction/{id}, as Flowise takes it (the parts Flywheel serves)."""

    refused_message = "The prediction request is not valid."

    question: Question
    streaming: Annotated[bool, Says("Must be true or false.")] = False
    overrideConfig: Annotated[dict[str, Any], Says("Must be an object (passed to the flow).")] = (
        Field(default_factory=dict)
    )
    history: Annotated[
        list[FlowiseMessage],
        Field(max_length=200),
        Says("Must be a list of {role: 'userMessage' | 'apiMessage', content: text}."),
    ] = Field(default_factory=list)
    chatId: Annotated[str | None, Field(max_length=200), Says("Must be text.")] = None
    chatflowId: Annotated[str | None, Says("Must be text.")] = None


def flowise_error(body: dict[str, Any], status: int) -> dict[str, Any]:
    error = body["error"]
    return {"statusCode": status, "success": False, "message": error_text(error), "error": error}


def flowise_error_response(err: ApplicationError) -> JsonResponse:
    return dialect_error_response(err, lambda body: flowise_error(body, err.status_code))


def _exchanges(history: list[FlowiseMessage]) -> list[dict[str, str]]:
    """Flowise's history as the query's exchanges (the newest 20)."""
    exchanges: list[dict[str, str]] = []
    for message in history:
        if message["role"] == "userMessage" or not exchanges or exchanges[-1]["answer"]:
            exchanges.append({"question": "", "answer": ""})
        key = "question" if message["role"] == "userMessage" else "answer"
        exchanges[-1][key] = message["content"][: 2_000 if key == "question" else 8_000]
    return exchanges[-20:]


async def _query(request: HttpRequest, api_key: ApiKey, flow: str) -> tuple[Any, Any]:
    body = validated(PredictionRequest, json_body(request))
    overrides = dict(body.overrideConfig)
    chat_id = body.chatId or overrides.pop("sessionId", None)
    session = None
    if isinstance(chat_id, str):
        session = await session_continued(tenant_id=api_key.tenant_id, session_id=chat_id)
    data: dict[str, Any] = {
        "question": body.question,
        "flow": flow_ref(await current_state(), api_key.tenant_id, flow),
        "parameters": overrides,
    }
    if session is not None:
        data["session_id"] = session
    else:
        data["history"] = _exchanges(body.history)
    try:
        return body, query_request(data)
    except ValidationError as err:  # the query's fields, as Flowise's
        names = {"parameters": "overrideConfig"}
        raise renamed_refusal(err, PredictionRequest.refused_message, names) from err


def _answer(request: HttpRequest, body: dict[str, Any], question: str) -> dict[str, Any]:
    return {
        "text": body["answer"],
        "question": question,
        "chatId": body["session_id"],
        "chatMessageId": body["request_id"],
        "sessionId": body["session_id"],
        "flywheel": flywheel_field(request, body, []),
    }


@async_api("POST", on_rate_limited=query_refused, error=flowise_error_response)
async def prediction(request: HttpRequest, api_key: ApiKey, flow: str) -> HttpResponseBase:
    """POST /compat/flowise/api/v1/prediction/{flow}: Flowise's prediction."""
    asked, query = await _query(request, api_key, flow)
    if asked.streaming:
        events = stream_answer(query, tenant=api_key.tenant)
        response = StreamingHttpResponse(
            _flowise_events(request, events, asked.question), content_type="text/event-stream"
        )
        response["Cache-Control"] = "no-cache"
        response["X-Accel-Buffering"] = "no"
        return response
    body = await answer_question(query, tenant=api_key.tenant)
    return JsonResponse(_answer(request, body, asked.question))


def _event(name: str, data: Any) -> str:
    return f"message:\ndata:{json.dumps({'event': name, 'data': data})}\n\n"


async def _flowise_events(
    request: HttpRequest, events: AsyncIterator[dict[str, Any]], question: str
) -> AsyncIterator[str]:
    """The answer's events as Flowise streams them: a ``token`` per chunk, then the
    ``metadata`` (chatId, chatMessageId, question, sessionId, and ``flywheel``) and
    ``end``; a failure is an ``error`` event, then ``end``."""
    async for event in events:
        name = event.pop("event")
        if name == "chunk":
            yield _event("token", event["text"])
        elif name == "end":
            answer = _answer(request, event, question)
            answer.pop("text")
            yield _event("metadata", answer)
        else:
            yield _event("error", flowise_error(event, 0)["message"])
    yield _event("end", "[DONE]")


async def chatflows_streaming(request: HttpRequest, flow: str) -> JsonResponse:
    """GET /compat/flowise/api/v1/chatflows-streaming/{flow}: every flow streams through
    Flywheel (whole answers come as one token). Public, as Flowise's own: its client
    asks without a key, and the answer says nothing of any flow."""
    if request.method != "GET":
        refused = flowise_error_response(
            MethodNotAllowedError(f"Method {request.method} not allowed.")
        )
        refused["Allow"] = "GET"
        return refused
    if len(flow) > MAX_FLOW_ID:
        return flowise_error_response(NotFoundError(f"No flow {flow[:200]!r}."))
    return JsonResponse({"isStreaming": True})

"""OpenAI's Responses API, its basic text form: ``POST /v1/responses``.

``input`` is the question (a string) or a conversation (messages whose content is
text: a string, or ``input_text`` / ``output_text`` parts); ``instructions`` is a
system message, not sent (a flow keeps its own prompt: a warning says so);
``max_output_tokens`` is max_tokens. The conversation becomes the same universal
query as a chat completion's (dialects/chat_request.py), answered by routing's one
service. The answer is a ``response`` with one assistant ``message`` of one
``output_text`` part; streamed, OpenAI's ``response.*`` events (created, the text's
deltas, completed). Tools, files, images and ``previous_response_id`` are refused:
Flywheel keeps no response to continue (a conversation is sent whole, or continued
through a Flywheel session).
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from typing import Annotated, Any, Literal, NotRequired

from django.http import HttpRequest, JsonResponse, StreamingHttpResponse
from django.http.response import HttpResponseBase
from pydantic import ConfigDict, Field, with_config
from typing_extensions import TypedDict

from dialects.catalog import model_named
from dialects.chat_request import MAX_MESSAGES, Message, OpenAIRequest, messages_query
from dialects.extension import flywheel_field, routing_headers
from dialects.openai_api import openai_error, openai_error_response
from flywheel.asyncapi import async_api, json_body
from flywheel.contract import NOT_BLANK, Says, validated
from flywheel.models import ApiKey
from routing.answering.query_input import MAX_QUESTION
from routing.answering.service import answer_question, query_refused, stream_answer
from routing.selection.state import current_state

TEXT_PARTS = "A content part must be {'type': 'input_text' or 'output_text', 'text': ...}."
NOT_PASSED = ("top_p", "store", "metadata", "truncation", "service_tier", "user", "reasoning")


@with_config(ConfigDict(extra="forbid", strict=True))
class TextPart(TypedDict):
    type: Literal["input_text", "output_text"]
    text: str


@with_config(ConfigDict(extra="forbid", strict=True))
class InputMessage(TypedDict):
    role: Annotated[
        Literal["system", "developer", "user", "assistant"],
        Says("Must be 'system', 'developer', 'user' or 'assistant'."),
    ]
    content: Annotated[str | list[TextPart], Says(TEXT_PARTS)]
    type: NotRequired[Literal["message"]]


class ResponsesRequest(OpenAIRequest):
    """POST /v1/responses, as OpenAI documents it (its basic text form)."""

    input: Annotated[
        Annotated[str, Field(min_length=1, max_length=MAX_QUESTION, pattern=NOT_BLANK)]
        | Annotated[list[InputMessage], Field(min_length=1, max_length=MAX_MESSAGES)],
        Says(f"Required: the question, or 1-{MAX_MESSAGES} messages of text."),
    ]
    instructions: Annotated[str | None, Says("Must be text.")] = None
    max_output_tokens: Annotated[int | None, Field(ge=1), Says("Must be a positive integer.")] = (
        None
    )
    truncation: Any = None
    user: Any = None
    reasoning: Any = None


def _messages(request: ResponsesRequest) -> list[Message]:
    given = (
        [InputMessage(role="user", content=request.input)]
        if isinstance(request.input, str)
        else request.input
    )
    messages: list[Message] = []
    if request.instructions:
        messages.append({"role": "system", "content": request.instructions})
    for item in given:
        content = item["content"]
        text = content if isinstance(content, str) else "".join(p["text"] for p in content)
        messages.append({"role": item["role"], "content": text})
    return messages


def _usage(body: dict[str, Any]) -> dict[str, Any] | None:
    usage = body.get("usage")
    if not usage:
        return None
    given, taken = usage.get("prompt_tokens") or 0, usage.get("completion_tokens") or 0
    return {
        "input_tokens": given,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": taken,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": usage.get("total_tokens") or given + taken,
    }


def _response(
    model: str, response_id: str, created: int, text: str | None, status: str = "completed"
) -> dict[str, Any]:
    """A ``response`` object: ``text`` None while it is in progress (no output yet)."""
    output = []
    if text is not None:
        part = {"type": "output_text", "text": text, "annotations": []}
        message = {"type": "message", "id": f"msg_{response_id}", "status": status}
        output.append({**message, "role": "assistant", "content": [part]})
    return {
        "id": f"resp_{response_id}",
        "object": "response",
        "created_at": created,
        "status": status,
        "model": model,
        "output": output,
        "error": None,
        "incomplete_details": None,
        "instructions": None,
        "metadata": {},
        "parallel_tool_calls": False,
        "temperature": None,
        "tool_choice": "none",
        "tools": [],
        "top_p": None,
    }


@async_api("POST", on_rate_limited=query_refused, error=openai_error_response)
async def responses(request: HttpRequest, api_key: ApiKey) -> HttpResponseBase:
    """POST /v1/responses: one text response (``response.*`` events with stream)."""
    asked = validated(ResponsesRequest, json_body(request))
    model = model_named(await current_state(), api_key.tenant_id, asked.model)
    query, warnings = messages_query(
        _messages(asked),
        temperature=asked.temperature,
        max_tokens=asked.max_output_tokens,
        options=asked.flywheel or {},
        left_out=[name for name in NOT_PASSED if getattr(asked, name) is not None],
        flow=model.flow_id if model else None,
        backend=str(model.backend_id) if model else None,
        field="input",
    )
    if asked.stream:
        events = stream_answer(query, tenant=api_key.tenant)
        response = StreamingHttpResponse(
            _events(request, asked.model, events, warnings), content_type="text/event-stream"
        )
        response["Cache-Control"] = "no-cache"
        response["X-Accel-Buffering"] = "no"
        return response
    body = await answer_question(query, tenant=api_key.tenant)
    flywheel = flywheel_field(request, body, warnings)
    response_id = body["request_id"].replace("-", "")
    answer = _response(asked.model, response_id, int(time.time()), body["answer"])
    answer.update(usage=_usage(body), flywheel=flywheel)
    return JsonResponse(answer, headers=routing_headers(flywheel))


async def _events(
    request: HttpRequest, model: str, events: AsyncIterator[dict[str, Any]], warnings: list[str]
) -> AsyncIterator[str]:
    """The answer's events as the Responses API streams them; a failure is an ``error``
    event (as OpenAI's error, with the sequence number)."""
    created, number, text = int(time.time()), 0, ""
    response_id = f"{time.time_ns():x}"  # the request's id comes last, with the routing
    where = {"item_id": f"msg_{response_id}", "output_index": 0, "content_index": 0}

    def event(name: str, **data: Any) -> str:
        nonlocal number
        number += 1
        payload = {"type": name, "sequence_number": number, **data}
        return f"event: {name}\ndata: {json.dumps(payload)}\n\n"

    yield event(
        "response.created", response=_response(model, response_id, created, None, "in_progress")
    )
    item = _response(model, response_id, created, "", "in_progress")["output"][0]
    yield event("response.output_item.added", output_index=0, item={**item, "content": []})
    part = {"type": "output_text", "text": "", "annotations": []}
    yield event("response.content_part.added", **where, part=part)
    async for message in events:
        name = message.pop("event")
        if name == "error":
            error = openai_error(message)["error"]
            yield event("error", code=error["code"], message=error["message"], param=error["param"])
            return
        if name == "chunk":
            text += message["text"]
            yield event("response.output_text.delta", **where, delta=message["text"])
        elif name == "end":
            flywheel = flywheel_field(request, message, warnings)
            yield event("response.output_text.done", **where, text=text)
            yield event("response.content_part.done", **where, part={**part, "text": text})
            done = _response(model, response_id, created, text)
            yield event("response.output_item.done", output_index=0, item=done["output"][0])
            done.update(usage=_usage(message), flywheel=flywheel)
            yield event("response.completed", response=done)

"""Langflow's run API, served by Flywheel: an application that calls a Langflow server
changes only its base URL, to ``<flywheel>/compat/langflow``.

``POST /compat/langflow/api/v1/run/{flow}[?stream=true]`` runs the flow (its
Langflow id, Flywheel's id, or its name) on whichever backend holds it, falling
back to the same flow on another, answered, recorded and rate-limited by routing's
one service. The key comes as Langflow's ``x-api-key`` header (or ``Authorization:
Bearer``). The body is Langflow's: ``input_value`` (the question), ``tweaks``
(passed to the flow), ``session_id`` (one an earlier answer gave continues its
conversation; any other starts one, whose id the answer gives), ``input_type``
and ``output_type`` (``chat`` or ``text``; ``any`` and ``debug`` as ``chat``).
The answer is Langflow's run response, the text where Langflow's documentation
reads it (``outputs[0].outputs[0].results.message.text``, and in ``artifacts``,
``outputs`` and ``messages``), with a ``flywheel`` field beside it; a stream is
Langflow's (JSON objects separated by blank lines: ``add_message`` for the
question, ``token`` per chunk, ``add_message`` for the answer, ``end`` with the
run response). Errors take Langflow's shape (``detail``) with Flywheel's own
``error`` beside it.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Annotated, Any, Literal

from django.http import HttpRequest, JsonResponse, StreamingHttpResponse
from django.http.response import HttpResponseBase
from pydantic import Field

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
from flywheel.errors import ApplicationError, ValidationError
from flywheel.models import ApiKey
from routing.answering.query_input import query_request
from routing.answering.service import answer_question, query_refused, stream_answer
from routing.answering.sessions import session_continued
from routing.selection.state import current_state

OUTPUT = "ChatOutput-flywheel"  # the component an answer names as its output
IO_TYPE = "Must be 'chat', 'text', 'any' or 'debug'."


class RunRequest(Contract):
    """POST /api/v1/run/{flow}, as Langflow takes it (the parts Flywheel serves)."""

    refused_message = "The run request is not valid."

    input_value: Question
    input_type: Annotated[Literal["chat", "text", "any"], Says(IO_TYPE)] = "chat"
    output_type: Annotated[Literal["chat", "text", "any", "debug"], Says(IO_TYPE)] = "chat"
    tweaks: Annotated[
        dict[str, Any] | None, Says("Must be an object (per component, passed to the flow).")
    ] = None
    session_id: Annotated[str | None, Field(max_length=200), Says("Must be text.")] = None
    output_component: Annotated[str | None, Says("Must be text.")] = None


def langflow_error(body: dict[str, Any]) -> dict[str, Any]:
    return {"detail": error_text(body["error"]), "error": body["error"]}


def langflow_error_response(err: ApplicationError) -> JsonResponse:
    return dialect_error_response(err, langflow_error)


async def _query(request: HttpRequest, api_key: ApiKey, flow: str) -> tuple[RunRequest, Any]:
    run = validated(RunRequest, json_body(request))
    session = None
    if run.session_id:
        session = await session_continued(tenant_id=api_key.tenant_id, session_id=run.session_id)
    data: dict[str, Any] = {
        "question": run.input_value,
        "flow": flow_ref(await current_state(), api_key.tenant_id, flow),
        "parameters": {"tweaks": run.tweaks} if run.tweaks else {},
    }
    if session is not None:
        data["session_id"] = session
    try:
        return run, query_request(data)
    except ValidationError as err:  # the query's fields, as Langflow's
        names = {"question": "input_value", "parameters": "tweaks"}
        raise renamed_refusal(err, RunRequest.refused_message, names) from err


def _message(text: str, session_id: str, *, machine: bool = True) -> dict[str, Any]:
    sender, name = ("Machine", "AI") if machine else ("User", "User")
    return {
        "text": text,
        "sender": sender,
        "sender_name": name,
        "session_id": session_id,
        "files": [],
        "error": False,
        "category": "message",
        "content_blocks": [],
    }


def run_response(request: HttpRequest, body: dict[str, Any], question: str) -> dict[str, Any]:
    """Langflow's run response for the answer ``body``, with the ``flywheel`` field."""
    text, session = body["answer"], body["session_id"]
    output: dict[str, Any] = {
        "results": {"message": _message(text, session)},
        "artifacts": {"message": text, "sender": "Machine", "sender_name": "AI", "files": []},
        "outputs": {"message": {"message": text, "type": "text"}},
        "logs": {"message": []},
        "messages": [
            {
                "message": text,
                "sender": "Machine",
                "sender_name": "AI",
                "session_id": session,
                "stream_url": None,
                "component_id": OUTPUT,
                "files": [],
                "type": "text",
            }
        ],
        "timedelta": None,
        "duration": None,
        "component_display_name": "Chat Output",
        "component_id": OUTPUT,
        "used_frozen_result": False,
    }
    return {
        "session_id": session,
        "outputs": [{"inputs": {"input_value": question}, "outputs": [output]}],
        "flywheel": flywheel_field(request, body, []),
    }


@async_api(
    "POST", on_rate_limited=query_refused, error=langflow_error_response, key_header="x-api-key"
)
async def run(request: HttpRequest, api_key: ApiKey, flow: str) -> HttpResponseBase:
    """POST /compat/langflow/api/v1/run/{flow}: Langflow's run."""
    streamed = _stream(request)
    asked, query = await _query(request, api_key, flow)
    if streamed:
        events = stream_answer(query, tenant=api_key.tenant)
        response = StreamingHttpResponse(
            _langflow_events(request, events, asked.input_value),
            content_type="text/event-stream; charset=utf-8",
        )
        response["Cache-Control"] = "no-cache"
        return response
    body = await answer_question(query, tenant=api_key.tenant)
    return JsonResponse(run_response(request, body, asked.input_value))


def _stream(request: HttpRequest) -> bool:
    """``?stream=``: true or false (absent: false), the one query parameter Langflow's run
    API takes. Raises ValidationError for another value, or another parameter."""
    unknown = sorted(name for name in request.GET if name != "stream")
    if unknown:
        raise ValidationError(
            RunRequest.refused_message,
            details={"fields": {name[:100]: "Unknown query parameter." for name in unknown[:10]}},
        )
    given = request.GET.getlist("stream")
    if not given:
        return False
    if len(given) == 1 and given[0].lower() in ("true", "false"):
        return given[0].lower() == "true"
    raise ValidationError(
        RunRequest.refused_message, details={"fields": {"stream": "Must be true or false."}}
    )


def _event(name: str, data: Any) -> str:
    return json.dumps({"event": name, "data": data}) + "\n\n"


async def _langflow_events(
    request: HttpRequest, events: AsyncIterator[dict[str, Any]], question: str
) -> AsyncIterator[str]:
    """The answer's events as Langflow streams them: the question's ``add_message``, a
    ``token`` per chunk, the answer's ``add_message``, then ``end`` with the run
    response; a failure is an ``error`` event, and no ``end`` (as Langflow's)."""
    opened = False
    async for event in events:
        name = event.pop("event")
        if name == "error":
            yield _event("error", {"error": langflow_error(event)["detail"]})
            return
        if not opened:
            session = event.get("session_id", "") if name == "end" else ""
            yield _event("add_message", _message(question, session, machine=False))
            opened = True
        if name == "chunk":
            yield _event("token", {"chunk": event["text"]})
        elif name == "end":
            yield _event("add_message", _message(event["answer"], event["session_id"]))
            yield _event("end", {"result": run_response(request, event, question)})

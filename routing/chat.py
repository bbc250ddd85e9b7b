"""The chat page (seed 001): ask, watch the answer stream in with its intent and the
backend and flow that answered, and pick up any earlier conversation.

A logged-in person asks as the tenant they act for (flywheel.services.tenant_for_user).
The page's script calls the JSON doors below, which call the same services as
the REST API: stream_answer for a question, sessions_list and session_history
for the sidebar. They need the session cookie and (for the POST) the CSRF token.
"""

from __future__ import annotations

import uuid

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, JsonResponse, StreamingHttpResponse
from django.http.response import HttpResponseBase
from django.shortcuts import render
from django.views.decorators.http import require_GET, require_POST

from flywheel.asyncapi import error_response, json_body
from flywheel.asyncdb import db
from flywheel.errors import ApplicationError, ValidationError
from flywheel.pages import error_page
from flywheel.ratelimit import person_admit
from flywheel.services import tenant_acted_for
from routing.answering.query_input import query_request
from routing.answering.service import stream_answer
from routing.answering.sessions import session_history, sessions_list
from routing.api import sse_events

CONVERSATIONS_LISTED = 50
ASKED_FIELDS = frozenset({"question", "session_id"})


@login_required
@require_GET
def chat_page(request: HttpRequest) -> HttpResponse:
    """The page; ``?session=<id>`` opens that conversation."""
    try:
        tenant = tenant_acted_for(request.user)
    except ApplicationError as err:
        return error_page(request, err)
    return render(request, "pages/chat.html", {"tenant": tenant})


@login_required
@require_POST
async def chat_ask(request: HttpRequest) -> HttpResponseBase:
    """POST {question, session_id?}: the answer as Server-Sent Events (chunk, then end
    or error), exactly as ``POST /api/v1/query`` with ``parameters.stream``. Each
    person's questions count against FLYWHEEL_RATE_LIMIT, as a key's would."""
    try:
        user = await request.auser()
        tenant = await db(tenant_acted_for)(user)
        person_admit(user=user)
        data = json_body(request)
        if not isinstance(data, dict) or not set(data) <= ASKED_FIELDS:
            raise ValidationError("Send a JSON object {question, session_id?} and nothing else.")
        asked = query_request({**data, "parameters": {"stream": True}})
    except ApplicationError as err:
        return error_response(err)
    response = StreamingHttpResponse(
        sse_events(request, stream_answer(asked, tenant=tenant, keep_session=True)),
        content_type="text/event-stream",
    )
    response["Cache-Control"] = "no-cache"
    response["X-Accel-Buffering"] = "no"
    return response


@login_required
@require_GET
def chat_conversations(request: HttpRequest) -> JsonResponse:
    """The sidebar: the tenant's conversations, most recent first."""
    try:
        rows = sessions_list(
            tenant_id=tenant_acted_for(request.user).pk, limit=CONVERSATIONS_LISTED
        )
    except ApplicationError as err:
        return error_response(err)
    return JsonResponse({"conversations": rows})


@login_required
@require_GET
def chat_conversation(request: HttpRequest, session_id: uuid.UUID) -> JsonResponse:
    """One conversation's turns, oldest first, to continue it."""
    try:
        turns = session_history(tenant_id=tenant_acted_for(request.user).pk, session_id=session_id)
    except ApplicationError as err:
        return error_response(err)
    return JsonResponse(
        {
            "session_id": str(session_id),
            "turns": [
                {"question": t.question, "answer": t.answer, "intent": t.intent} for t in turns
            ],
        }
    )

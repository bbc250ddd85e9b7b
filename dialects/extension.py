"""What every dialect's door shares: what Flywheel did for an answer, beside it (the
``flywheel`` field and the ``X-Flywheel-*`` headers, never in the answer's text), a
question as the run APIs take it, and Flywheel's errors in a dialect's words."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Annotated, Any

from django.http import HttpRequest, JsonResponse
from pydantic import Field

from flywheel.asyncapi import error_response
from flywheel.contract import NOT_BLANK, Says
from flywheel.errors import ApplicationError, ValidationError
from flywheel.rest import absolute_url
from routing.answering.query_input import MAX_QUESTION

# The question of Flowise's and Langflow's run APIs: the universal query's bounds.
Question = Annotated[
    str,
    Field(min_length=1, max_length=MAX_QUESTION, pattern=NOT_BLANK),
    Says(f"Required: 1-{MAX_QUESTION} characters of text, not all blank."),
]


def routing_headers(flywheel: dict[str, Any]) -> dict[str, str]:
    names = {"intent": "Intent", "backend": "Backend", "flow": "Flow", "request_id": "Request-Id"}
    headers = {f"X-Flywheel-{h}": str(flywheel[k]) for k, h in names.items() if flywheel.get(k)}
    headers["X-Flywheel-Trace"] = flywheel["trace_url"]
    return {name: value.encode("ascii", "replace").decode() for name, value in headers.items()}


def flywheel_field(
    request: HttpRequest, body: dict[str, Any], warnings: list[str]
) -> dict[str, Any]:
    """What Flywheel did for the answer ``body``: the extension field."""
    routing = body.get("routing") or {}
    return {
        "request_id": body["request_id"],
        "session_id": body["session_id"],
        "intent": routing.get("intent"),
        "backend": routing.get("backend"),
        "flow": routing.get("flow"),
        "fallback_used": routing.get("fallback_used", False),
        "trace_url": absolute_url(request, body["trace_url"]),
        "session_url": absolute_url(request, body["session_url"]),
        "warnings": warnings + body.get("warnings", []),  # the door's, then the flow's
    }


def error_text(error: dict[str, Any]) -> str:
    """Flywheel's error (its shape's ``error``) in one line: its message, then each bad
    field with why, for a dialect whose errors are a message alone."""
    fields = error.get("details", {}).get("fields") or {}
    said = "; ".join(f"{name}: {why}" for name, why in fields.items())
    return f"{error['message']} {said}" if said else str(error["message"])


def dialect_error_response(
    err: ApplicationError, shape: Callable[[dict[str, Any]], dict[str, Any]]
) -> JsonResponse:
    """``err`` answered as Flywheel answers it (status, Retry-After, WWW-Authenticate),
    its body in a dialect's shape: ``shape`` of Flywheel's error body."""
    response = error_response(err)
    response.content = json.dumps(shape(err.as_dict())).encode()
    return response


def renamed_refusal(
    err: ValidationError, message: str, names: Mapping[str, str]
) -> ValidationError:
    """The universal query's refusal ``err`` in a dialect's words: headed by ``message``,
    each bad field under the dialect's name for it (``names``, where they differ)."""
    fields = err.details.get("fields", {})
    renamed = {names.get(field, field): why for field, why in fields.items()}
    return ValidationError(message, details={"fields": renamed})

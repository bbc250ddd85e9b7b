"""What Flywheel did for an answer, beside it on every dialect's door: the ``flywheel``
field and the ``X-Flywheel-*`` headers. Never in the answer's text."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest

from flywheel.rest import absolute_url


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
        "warnings": warnings,
    }


def error_text(error: dict[str, Any]) -> str:
    """Flywheel's error (its shape's ``error``) in one line: its message, then each bad
    field with why, for a dialect whose errors are a message alone."""
    fields = error.get("details", {}).get("fields") or {}
    said = "; ".join(f"{name}: {why}" for name, why in fields.items())
    return f"{error['message']} {said}" if said else str(error["message"])

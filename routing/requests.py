"""The universal query's input, validated the same way for every door."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from flywheel.errors import ValidationError

MAX_QUESTION = 10_000
MAX_PARAMETERS_BYTES = 20_000
_SLUG = re.compile(r"^[-a-z0-9_]{1,50}$")
_FIELDS = {"question", "intent", "backend", "session_id", "parameters", "include_routing_metadata"}


@dataclass(frozen=True)
class QueryRequest:
    question: str
    intent: str | None = None
    backend: str = "auto"
    session_id: str | None = None
    parameters: dict[str, Any] = field(default_factory=dict)
    include_routing_metadata: bool = True

    @property
    def stream(self) -> bool:
        return bool(self.parameters.get("stream"))


def _check_parameters(parameters: Any, errors: dict[str, str]) -> dict[str, Any]:
    if parameters is None:
        return {}
    if not isinstance(parameters, dict):
        errors["parameters"] = "Must be an object."
        return {}
    temperature = parameters.get("temperature")
    if temperature is not None and (
        isinstance(temperature, bool)
        or not isinstance(temperature, int | float)
        or not 0 <= temperature <= 2
    ):
        errors["parameters.temperature"] = "Must be a number from 0 to 2."
    max_tokens = parameters.get("max_tokens")
    if max_tokens is not None and (
        isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1
    ):
        errors["parameters.max_tokens"] = "Must be a positive integer."
    stream = parameters.get("stream")
    if stream is not None and not isinstance(stream, bool):
        errors["parameters.stream"] = "Must be true or false."
    try:
        size = len(json.dumps(parameters))
    except (TypeError, ValueError):
        errors["parameters"] = "Must be plain JSON."
    else:
        if size > MAX_PARAMETERS_BYTES:
            errors["parameters"] = f"Must be under {MAX_PARAMETERS_BYTES} bytes of JSON."
    return parameters


def query_request(data: Mapping[str, Any]) -> QueryRequest:
    """Validate a query's input. Raises ValidationError listing every bad field."""
    if not isinstance(data, Mapping):
        raise ValidationError("The request body must be a JSON object.")
    errors: dict[str, str] = {}
    unknown = set(data) - _FIELDS
    if unknown:
        errors["unknown_fields"] = ", ".join(sorted(unknown))
    question = data.get("question")
    if not isinstance(question, str) or not question.strip():
        errors["question"] = "Required: a non-empty string."
    elif len(question) > MAX_QUESTION:
        errors["question"] = f"At most {MAX_QUESTION} characters."
    intent = data.get("intent")
    if intent is not None and (not isinstance(intent, str) or not _SLUG.match(intent)):
        errors["intent"] = "Must be an intent slug such as 'code-review'."
    backend = data.get("backend", "auto")
    if backend is None:
        backend = "auto"
    if not isinstance(backend, str) or not 0 < len(backend.strip()) <= 100:
        errors["backend"] = "Must be 'auto' or a backend's name or kind."
    session_id = data.get("session_id")
    if session_id is not None and not isinstance(session_id, str):
        errors["session_id"] = "Must be a string."
    parameters = _check_parameters(data.get("parameters"), errors)
    include = data.get("include_routing_metadata", True)
    if not isinstance(include, bool):
        errors["include_routing_metadata"] = "Must be true or false."
    if errors:
        raise ValidationError("The query is not valid.", details={"fields": errors})
    return QueryRequest(
        question=str(question).strip(),
        intent=intent,
        backend=str(backend).strip(),
        session_id=session_id,
        parameters=dict(parameters),
        include_routing_metadata=bool(include),
    )


def query_type_request(data: Any) -> str:
    """The question of a query-router call (seed 004): ``{"query"}`` and nothing else.

    The tenant comes from the caller's API key, so a ``tenant_id`` (or any
    other field) in the body is refused, never trusted (AC 8).
    """
    if not isinstance(data, Mapping):
        raise ValidationError("The request body must be a JSON object.")
    errors = {name: "Unknown field." for name in data if name != "query"}
    question = data.get("query")
    if not isinstance(question, str) or not question.strip() or len(question) > MAX_QUESTION:
        errors["query"] = f"Required: 1-{MAX_QUESTION} characters."
    if errors:
        raise ValidationError("The query is not valid.", details={"fields": errors})
    return str(question).strip()

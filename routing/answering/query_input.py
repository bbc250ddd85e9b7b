"""The universal query's input, validated the same way for every door.

The contract (flywheel/openapi.py states it for the REST doors): ``question``
1-10000 characters, not all blank; ``intent`` a slug of 1-50 characters
``[-a-z0-9_]``; ``backend`` 1-100 characters; ``session_id`` a UUID (kept in
canonical form); ``parameters`` an object of plain JSON under 20000 bytes,
nested at most 32 levels counting the query itself; ``flow`` a flow to run
(Flywheel's Flow id, or the backend's own id for it: 1-200 characters);
``fallback`` true or false (with ``flow``: may other flows answer if it
fails); no other field. No string
may hold a NUL character or a lone surrogate, whichever door it came through
(the REST doors' JSON parser refuses them first).
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from chatflows.lifecycle import FLOW_ID, MAX_FLOW_ID
from flywheel.errors import ValidationError
from flywheel.jsonin import json_problem, string_problem

MAX_QUESTION = 10_000
MAX_BACKEND = 100
MAX_PARAMETERS_BYTES = 20_000
SESSION_ID_RULE = "Must be a UUID returned by an earlier answer."
_SLUG = re.compile(r"[-a-z0-9_]{1,50}")
# A session id as answers give it (and the schema's "uuid" format): 8-4-4-4-12 hex digits.
_UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
_FIELDS = {
    "question",
    "intent",
    "backend",
    "session_id",
    "parameters",
    "include_routing_metadata",
    "flow",
    "fallback",
}


@dataclass(frozen=True)
class QueryRequest:
    question: str
    intent: str | None = None
    backend: str = "auto"
    session_id: str | None = None
    parameters: dict[str, Any] = field(default_factory=dict)
    include_routing_metadata: bool = True
    flow: str | None = None
    fallback: bool = False

    @property
    def stream(self) -> bool:
        return bool(self.parameters.get("stream"))


def _check_parameters(parameters: Any, errors: dict[str, str]) -> dict[str, Any]:
    if parameters is None:
        return {}
    if not isinstance(parameters, dict):
        errors["parameters"] = "Must be an object."
        return {}
    # Present means typed as the schema says: null is not taken for "absent".
    temperature = parameters.get("temperature")
    if "temperature" in parameters and (
        isinstance(temperature, bool)
        or not isinstance(temperature, int | float)
        or not 0 <= temperature <= 2
    ):
        errors["parameters.temperature"] = "Must be a number from 0 to 2."
    max_tokens = parameters.get("max_tokens")
    if "max_tokens" in parameters and (
        isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1
    ):
        errors["parameters.max_tokens"] = "Must be a positive integer."
    stream = parameters.get("stream")
    if "stream" in parameters and not isinstance(stream, bool):
        errors["parameters.stream"] = "Must be true or false."
    if "tweaks" in parameters and not isinstance(parameters["tweaks"], dict):
        errors["parameters.tweaks"] = "Must be an object (Langflow's tweaks, per component)."
    # Checked where it sits in a query, so the depth counts as it does in a REST body.
    problem = json_problem({"parameters": parameters})
    if problem is not None:  # from a door that did not parse JSON (a command, a tool)
        path, reason = problem
        errors["parameters"] = f"{path.removeprefix('$.')[:100]} {reason}."
        return parameters
    try:
        size = len(json.dumps(parameters, allow_nan=False))
    except (TypeError, ValueError):
        errors["parameters"] = "Must be plain JSON."
    else:
        if size > MAX_PARAMETERS_BYTES:
            errors["parameters"] = f"Must be under {MAX_PARAMETERS_BYTES} bytes of JSON."
    return parameters


def _check_question(question: Any, errors: dict[str, str]) -> None:
    if not isinstance(question, str) or not question.strip():
        errors["question"] = "Required: a non-empty string."
    elif len(question) > MAX_QUESTION:
        errors["question"] = f"At most {MAX_QUESTION} characters."
    elif problem := string_problem(question):
        errors["question"] = f"Must be text: it {problem}."


def _check_backend(backend: Any, errors: dict[str, str]) -> str:
    if backend is None:
        return "auto"
    if (
        not isinstance(backend, str)
        or not 0 < len(backend.strip()) <= MAX_BACKEND
        or string_problem(backend)
    ):
        errors["backend"] = "Must be 'auto' or a backend's name, kind or id."
        return "auto"
    return backend.strip()


def _check_flow(flow: Any, errors: dict[str, str]) -> str | None:
    if flow is None:
        return None
    if isinstance(flow, int) and not isinstance(flow, bool) and flow >= 0:
        return str(flow)
    if isinstance(flow, str) and FLOW_ID.fullmatch(flow):
        return flow
    errors["flow"] = (
        "Must be a flow's id: Flywheel's (a number) or its backend's "
        f"(1-{MAX_FLOW_ID} letters, digits, '-', '_', '.' or ':')."
    )
    return None


def _check_session_id(session_id: Any, errors: dict[str, str]) -> str | None:
    """The session id, lower-cased; only the hyphenated form answers give is taken."""
    if session_id is None:
        return None
    if isinstance(session_id, str) and _UUID.fullmatch(session_id):
        return str(uuid.UUID(session_id))
    errors["session_id"] = SESSION_ID_RULE
    return None


def query_request(data: Mapping[str, Any]) -> QueryRequest:
    """Validate a query's input (the contract above).

    Returns a QueryRequest with the question and backend stripped and the
    session id in canonical form. Raises ValidationError listing every bad
    field under ``details.fields``.
    """
    if not isinstance(data, Mapping):
        raise ValidationError("The request body must be a JSON object.")
    errors: dict[str, str] = {}
    unknown = {str(name)[:50] for name in data} - _FIELDS
    if unknown:
        errors["unknown_fields"] = ", ".join(sorted(unknown))
    question = data.get("question")
    _check_question(question, errors)
    intent = data.get("intent")
    if intent is not None and (not isinstance(intent, str) or not _SLUG.fullmatch(intent)):
        errors["intent"] = "Must be an intent slug such as 'code-review'."
    backend = _check_backend(data.get("backend", "auto"), errors)
    session_id = _check_session_id(data.get("session_id"), errors)
    parameters = _check_parameters(data.get("parameters"), errors)
    include = data.get("include_routing_metadata", True)
    if not isinstance(include, bool):
        errors["include_routing_metadata"] = "Must be true or false."
    flow = _check_flow(data.get("flow"), errors)
    fallback = data.get("fallback", False)
    if not isinstance(fallback, bool):
        errors["fallback"] = "Must be true or false."
    if errors:
        raise ValidationError("The query is not valid.", details={"fields": errors})
    return QueryRequest(
        question=str(question).strip(),
        intent=intent,
        backend=backend,
        session_id=session_id,
        parameters=dict(parameters),
        include_routing_metadata=bool(include),
        flow=flow,
        fallback=bool(fallback),
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
    if (
        not isinstance(question, str)
        or not question.strip()
        or len(question) > MAX_QUESTION
        or string_problem(question)
    ):
        errors["query"] = f"Required: 1-{MAX_QUESTION} characters of text."
    if errors:
        raise ValidationError("The query is not valid.", details={"fields": errors})
    return str(question).strip()

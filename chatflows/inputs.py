"""The flow lifecycle's input, checked before any call to a backend (seed 003).

A name of 1-255 characters; ``flow_data`` a JSON object under 1 MB holding
``nodes`` and ``edges`` lists; ``type`` in CHATFLOW_TYPES; a flow id that
cannot leave a backend's URL path; a backend named by id or name; a generate
description of at least 10 characters. A bad value is a ValidationError in
seed 003's shape, naming the field, the constraint and (shortly) the value.
"""

from __future__ import annotations

import json
import re
from typing import Any

from flywheel.errors import ValidationError
from flywheel.jsonin import string_problem

CHATFLOW_TYPES = ("CHATFLOW", "AGENTFLOW", "MULTIAGENT", "ASSISTANT")
MAX_NAME = 255
MAX_FLOW_DATA_BYTES = 1_000_000
MIN_DESCRIPTION = 10
MAX_DESCRIPTION = 10_000
MAX_FLOW_ID = 200  # as Flow.external_id
FLOW_ID = re.compile(rf"[A-Za-z0-9][A-Za-z0-9_.:-]{{0,{MAX_FLOW_ID - 1}}}")
MAX_BACKEND = 100


def invalid(field: str, message: str, constraint: str, value: Any = None) -> ValidationError:
    """Seed 003's shape: ``details`` names the field, the constraint and (short) value."""
    shown = value if isinstance(value, bool | int | float) or value is None else str(value)[:80]
    return ValidationError(
        message,
        details={
            "field": field,
            "value": shown,
            "constraint": constraint,
            "fields": {field: message},
        },
    )


def check_name(value: Any) -> str:
    if not isinstance(value, str) or not value.strip() or len(value) > MAX_NAME:
        raise invalid(
            "name", f"Chatflow name must be between 1 and {MAX_NAME} characters.", "length", value
        )
    if problem := string_problem(value):
        raise invalid("name", f"Chatflow name must be text: it {problem}.", "text")
    return value.strip()


def check_flow_data(value: Any) -> dict[str, Any]:
    """``flow_data`` as seed 003 sends it: a JSON string under 1 MB of an object holding
    ``nodes`` and ``edges`` lists. Returns the decoded object."""
    if not isinstance(value, str) or not value:
        raise invalid("flow_data", "flow_data must be a JSON string.", "type", "(not a string)")
    if len(value.encode("utf-8", "surrogatepass")) >= MAX_FLOW_DATA_BYTES:
        raise invalid("flow_data", "flow_data must be under 1 MB.", "maxSize", "(too large)")
    try:
        data = json.loads(value)
    except json.JSONDecodeError as err:
        raise invalid(
            "flow_data", f"flow_data is not valid JSON: {err.msg}.", "json", "(not JSON)"
        ) from err
    except ValueError as err:  # e.g. a number too long to convert
        raise invalid("flow_data", "flow_data is not valid JSON.", "json", "(not JSON)") from err
    if not isinstance(data, dict):
        raise invalid("flow_data", "flow_data must be a JSON object.", "object", "(not an object)")
    missing = [k for k in ("nodes", "edges") if not isinstance(data.get(k), list)]
    if missing:
        raise invalid(
            "flow_data",
            f"flow_data must hold {' and '.join(missing)} as lists.",
            "nodesAndEdges",
            "(missing " + ", ".join(missing) + ")",
        )
    return data


def check_type(value: Any) -> str:
    if value not in CHATFLOW_TYPES:
        raise invalid("type", f"type must be one of {', '.join(CHATFLOW_TYPES)}.", "enum", value)
    return str(value)


def check_deployed(value: Any, field: str = "deployed") -> bool:
    if not isinstance(value, bool):
        raise invalid(field, f"{field} must be true or false.", "type", value)
    return value


def check_flow_id(value: Any, field: str = "chatflow_id") -> str:
    """A flow id as the backends and Flywheel make them (UUIDs, digits): it goes into a
    backend's URL path, so nothing that could leave that path (``/``, ``..``, ``?``)."""
    text = str(value) if isinstance(value, str | int) and not isinstance(value, bool) else ""
    if not FLOW_ID.fullmatch(text):
        raise invalid(
            field,
            f"{field} must be a flow's id: 1-{MAX_FLOW_ID} letters, digits, '-', '_', '.' "
            "or ':', starting with a letter or digit.",
            "format",
            value,
        )
    return text


def check_backend(value: Any) -> str | None:
    """The backend named (an id or a name, trimmed), or None when none is: absent, or a
    string blank once trimmed (``?backend=`` sent empty, as allowEmptyValue permits)."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if not isinstance(value, str | int) or isinstance(value, bool):
        raise invalid("backend", "backend must be a backend's id or name.", "type", value)
    text = str(value).strip()
    if not 0 < len(text) <= MAX_BACKEND or string_problem(text):
        raise invalid(
            "backend",
            f"backend must be a backend's id or name (1-{MAX_BACKEND} characters).",
            "format",
            value,
        )
    return text


def check_description(value: Any) -> str:
    if not isinstance(value, str) or len(value.strip()) < MIN_DESCRIPTION:
        raise invalid(
            "description",
            f"Describe the flow in at least {MIN_DESCRIPTION} characters.",
            "minLength",
            value,
        )
    if len(value) > MAX_DESCRIPTION or string_problem(value):
        raise invalid(
            "description",
            f"The description must be text of at most {MAX_DESCRIPTION} characters.",
            "maxLength",
        )
    return value.strip()

"""Reading JSON from clients: one strict parser for every door.

Python's json module accepts what PostgreSQL and the backends cannot take
(NaN and Infinity, numbers too large for a float, lone surrogates, NUL
characters) and recurses without a bound on deep nesting (a RecursionError,
which would answer 500). Every door parses request bodies with
:func:`parse_json`, which refuses each of these with a ValidationError naming
where it was found; :func:`string_problem` is the same check for one string
that arrives another way (a query-string value, a command-line argument).
"""

from __future__ import annotations

import json
import math
from typing import IO, Any

from rest_framework.parsers import JSONParser

from flywheel.errors import ValidationError

# No request Flywheel takes needs more; 1000 levels would reach Python's recursion limit.
MAX_DEPTH = 32
_PATH_KEY = 40  # characters of each key shown in a path


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):  # 1e400 would become Infinity, which JSON cannot carry
        raise ValueError(f"the number {text[:20]} is too large")
    return value


NUL = "contains a NUL character (\\u0000)"
LONE_SURROGATE = "contains a lone surrogate (not valid Unicode)"


def string_problem(text: str) -> str | None:
    """Why ``text`` cannot be taken (a NUL character, a lone surrogate), or None."""
    if "\x00" in text:
        return NUL
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return LONE_SURROGATE
    return None


def json_problem(value: Any) -> tuple[str, str] | None:
    """The first thing in parsed JSON that Flywheel refuses, as (path, reason), or None.

    Iterative, so any depth is safe; keys are cut short in the path, so a deep
    document of long keys does not build paths of its size at every level.
    """
    stack: list[tuple[Any, str, int]] = [(value, "$", 0)]
    while stack:
        item, path, depth = stack.pop()
        if isinstance(item, str):
            problem = string_problem(item)
            if problem:
                return path, problem
        elif isinstance(item, dict | list | tuple):
            if depth >= MAX_DEPTH:
                return path, f"nested more than {MAX_DEPTH} levels deep"
            if isinstance(item, dict):
                for key, child in item.items():
                    problem = string_problem(key) if isinstance(key, str) else None
                    if problem:
                        return f"{path}.{key[:_PATH_KEY]!r}", f"key {problem}"
                    stack.append((child, f"{path}.{str(key)[:_PATH_KEY]}", depth + 1))
            else:
                stack.extend((child, f"{path}[{i}]", depth + 1) for i, child in enumerate(item))
    return None


def parse_json(raw: bytes | str) -> Any:
    """``raw`` as JSON. Raises ValidationError when it is not JSON or holds what we refuse."""
    try:
        value = json.loads(raw, parse_constant=_refuse_constant, parse_float=_finite_float)
    except RecursionError as err:
        raise ValidationError(
            "The request body is nested too deeply.", details={"max_depth": MAX_DEPTH}
        ) from err
    except (ValueError, UnicodeDecodeError) as err:
        raise ValidationError(
            "The request body is not valid JSON.", details={"reason": str(err)[:200]}
        ) from err
    problem = json_problem(value)
    if problem is not None:
        path, reason = problem[0][:200], problem[1]
        raise ValidationError(
            f"The request body is not acceptable: {path} {reason}.", details={"path": path}
        )
    return value


class StrictJSONParser(JSONParser):
    """DRF's JSON parser, through :func:`parse_json`."""

    def parse(
        self, stream: IO[Any], media_type: str | None = None, parser_context: Any = None
    ) -> Any:
        return parse_json(stream.read() or b"null")

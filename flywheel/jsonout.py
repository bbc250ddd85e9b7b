"""JSON out on the hot path: orjson, with the standard library for what orjson refuses.

Every routed question encodes JSON four times (the backend's request, the
decision's spool line, the batch handed to PostgreSQL, the answer); measured
by bench/load.py, the standard library's encoder spent about 60 µs of a
question's CPU on them, orjson a tenth of that.

orjson refuses a few values the standard library takes: a string holding a
lone surrogate (a backend may answer one), an integer past 64 bits, a key
that is not a string. For those :func:`dumps` falls back to ``json.dumps``,
whose ASCII output escapes the surrogate, so whatever was encodable before
still is. Output is compact UTF-8; NaN and infinities become ``null``
(the standard library would write ``NaN``, which no JSON parser need accept).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import orjson
from django.http import HttpResponse

Default = Callable[[Any], Any]


def dumps(value: Any, *, default: Default | None = None) -> bytes:
    """``value`` as compact JSON bytes. ``default`` turns what neither encoder knows
    (orjson knows UUIDs and dataclasses) into something they do, or raises TypeError."""
    try:
        return orjson.dumps(value, default=default)
    except TypeError:  # a lone surrogate, a huge integer, a non-string key: slow path
        return json.dumps(value, default=default, separators=(",", ":")).encode()


def json_response(data: Any, *, status: int = 200) -> HttpResponse:
    """Django's JsonResponse, encoded by :func:`dumps`: for bodies of plain JSON values
    (and UUIDs), such as the query path's answers. Anything else takes JsonResponse."""
    return HttpResponse(dumps(data), content_type="application/json", status=status)

"""Scrubbing what a backend said before anyone else reads it.

Backend error text travels far: health rows, the fallback chain of a
decision, API answers, admin pages, command output. A backend that echoes
the credentials Flywheel sent (or a page full of internal secrets) must not
carry them there, so every message taken from a backend passes through
:func:`redact` at the source, in backends/.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import quote

REDACTED = "[redacted]"
# Long enough to say what went wrong, short enough that no page is repeated.
MESSAGE_CHARS = 300
# Shorter values would blank out ordinary words; real keys are far longer.
MIN_SECRET_CHARS = 4

_CREDENTIALS = (
    # Authorization schemes followed by a token: "Bearer abc…", "Basic dXNl…".
    # (a token holds a digit or is long: "Basic authentication failed" stays readable).
    (
        re.compile(
            r"(?i)\b(bearer|basic|digest)(\s+)(?:(?=[\w.~+/=:-]*\d)[\w.~+/=:-]{8,}|[\w.~+/=:-]{20,})"
        ),
        rf"\1\2{REDACTED}",
    ),
    # name=value and "name": "value" pairs whose name says it holds a secret.
    (
        re.compile(
            r"(?i)([\w-]*(?:api[_-]?key|apikey|token|secret|passw(?:or)?d|pwd|credential"
            r"|authorization|cookie)[\w-]*[\"']?\s*[:=]\s*[\"']?)([^\s\"',;&}]+)"
        ),
        rf"\1{REDACTED}",
    ),
    # OpenAI-style keys, and keys shaped like them.
    (re.compile(r"\b(?:sk|pk|rk)-[\w-]{6,}"), REDACTED),
    # user:password@ inside a URL.
    (re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/\s@]*@"), rf"\1{REDACTED}@"),
)
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]+")


def secret_spellings(values: Iterable[str]) -> tuple[str, ...]:
    """The values Flywheel sent as credentials, as an echo might spell them, longest first.

    A header value counts whole and without its scheme ("Bearer "), raw,
    URL-encoded and JSON-escaped.
    """
    found: set[str] = set()
    for value in values:
        for part in (value, *value.split(None, 1)[1:]):
            found.update((part, quote(part, safe=""), json.dumps(part)[1:-1]))
    return tuple(sorted((s for s in found if len(s) >= MIN_SECRET_CHARS), key=len, reverse=True))


def redact(text: str, secrets: Iterable[str] = (), *, limit: int = MESSAGE_CHARS) -> str:
    """``text`` without the given secrets, anything shaped like a credential, or control
    characters, cut to ``limit`` characters."""
    for secret in secrets:
        text = text.replace(secret, REDACTED)
    for pattern, replacement in _CREDENTIALS:
        text = pattern.sub(replacement, text)
    text = _CONTROL.sub(" ", text).strip()
    return text if len(text) <= limit else text[: limit - 1] + "…"


def redact_value(value: Any, secrets: Iterable[str] = ()) -> Any:
    """:func:`redact` applied to every string inside a JSON-like value."""
    secrets = tuple(secrets)
    if isinstance(value, str):
        return redact(value, secrets)
    if isinstance(value, Mapping):
        return {str(k): redact_value(v, secrets) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [redact_value(v, secrets) for v in value]
    return value

"""Responses captured from the real Flowise and Langflow servers (tests/fixtures/).

scripts/peers/capture_fixtures.py records them; tests replay them through
httpx mock transports, so the mocks say exactly what the servers said.
"""

from __future__ import annotations

import copy
import json
from functools import cache
from pathlib import Path
from typing import Any

import httpx

FIXTURES = Path(__file__).parent / "fixtures"


@cache
def _load(kind: str, name: str) -> dict[str, Any]:
    return json.loads((FIXTURES / kind / f"{name}.json").read_text())


def captured(kind: str, name: str) -> dict[str, Any]:
    """A fresh copy of one capture: ``{"request", "status", "headers", "body"}``."""
    return copy.deepcopy(_load(kind, name))


def body(kind: str, name: str) -> Any:
    return captured(kind, name)["body"]


def response(kind: str, name: str, **overrides: Any) -> httpx.Response:
    """The captured response as an httpx.Response (status, content type and body)."""
    capture = captured(kind, name)
    capture.update(overrides)
    content_type = capture.get("headers", {}).get("content-type", "application/json")
    payload = capture["body"]
    content = payload.encode() if isinstance(payload, str) else json.dumps(payload).encode()
    return httpx.Response(
        capture["status"], content=content, headers={"content-type": content_type}
    )

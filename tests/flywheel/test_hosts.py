"""One check of the Host header (and of a browser's Origin) for every door."""

from __future__ import annotations

import json
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.test import override_settings

from flywheel.hosts import HostCheck, origin_allowed


@pytest.mark.parametrize(
    ("origin", "allowed"),
    [
        ("", True),  # not a browser
        ("http://127.0.0.1:8000", True),
        ("https://localhost", True),
        ("http://evil.example", False),
        ("http://127.0.0.1.evil.example", False),
        ("null", False),
        ("ftp://localhost", False),
    ],
)
def test_an_origin_is_held_to_the_hosts_served(origin: str, allowed: bool) -> None:
    with override_settings(ALLOWED_HOSTS=["127.0.0.1", "localhost"]):
        assert origin_allowed(origin) is allowed


def _through_host_check(headers: dict[str, str]) -> tuple[int, Any]:
    reached: list[bool] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        reached.append(True)
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"{}"})

    sent: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b""}

    scope = {
        "type": "http",
        "method": "POST",
        "path": "/mcp",
        "query_string": b"",
        "server": ("127.0.0.1", 8000),
        "headers": [(k.lower().encode(), v.encode()) for k, v in headers.items()],
    }
    async_to_sync(HostCheck(app))(scope, receive, send)
    body = json.loads(sent[1]["body"]) if not reached else None
    return sent[0]["status"], body


def test_the_mcp_door_refuses_a_foreign_host_as_the_api_does() -> None:
    with override_settings(ALLOWED_HOSTS=["127.0.0.1"]):
        status, body = _through_host_check({"Host": "evil.example"})

    assert status == 400
    assert body["error"] == {
        "type": "BadRequest",
        "message": "The Host header names a host this server does not serve.",
        "details": {"host": "evil.example"},
    }


def test_the_mcp_door_refuses_a_foreign_origin() -> None:
    with override_settings(ALLOWED_HOSTS=["127.0.0.1"]):
        status, body = _through_host_check(
            {"Host": "127.0.0.1:8000", "Origin": "http://evil.example"}
        )

    assert status == 403
    assert body["error"]["type"] == "PermissionDenied"


def test_the_mcp_door_lets_a_served_host_through() -> None:
    with override_settings(ALLOWED_HOSTS=["127.0.0.1"]):
        status, _ = _through_host_check(
            {"Host": "127.0.0.1:8000", "Origin": "http://127.0.0.1:8000"}
        )

    assert status == 200

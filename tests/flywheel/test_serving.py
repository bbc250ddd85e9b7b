"""How Flywheel is served: whose forwarded headers count, and the server's read limits."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
import uvicorn
from django.test import override_settings

from flywheel import ratelimit
from flywheel.ratelimit import RateLimiter
from flywheel.serving import APPLICATION, uvicorn_options

pytestmark = pytest.mark.django_db(transaction=True)

MID_WINDOW = 999_999_990.0  # 30 s into a minute: no request straddles a window's edge


@pytest.fixture(autouse=True)
def _mid_window(monkeypatch: pytest.MonkeyPatch) -> None:
    held = RateLimiter(ratelimit.limiter().cache, clock=lambda: MID_WINDOW)
    monkeypatch.setattr(ratelimit, "_current", held)


def _served_app() -> Any:
    """The application as uvicorn wraps it when ``manage.py serve`` starts it."""
    config = uvicorn.Config(APPLICATION, log_config=None, **uvicorn_options())
    config.load()
    return config.loaded_app


async def _bad_keys(app: Any, peer: str, forwarded_for: list[str]) -> list[int]:
    """A bad key per forwarded address, each request from ``peer``: the statuses."""
    transport = httpx.ASGITransport(app=app, client=(peer, 40000))
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as http:
        return [
            (
                await http.get(
                    "/api/v1/whoami",
                    headers={"Authorization": f"Bearer bad-{i}", "X-Forwarded-For": address},
                )
            ).status_code
            for i, address in enumerate(forwarded_for)
        ]


ROTATED = [f"203.0.113.{i}" for i in range(40)]


@override_settings(AUTH_FAILURE_LIMIT=(30, 60))
async def test_bad_keys_from_loopback_rotating_x_forwarded_for_count_against_one_client() -> None:
    statuses = await _bad_keys(_served_app(), "127.0.0.1", ROTATED)

    assert statuses[:30] == [401] * 30
    assert statuses[30:] == [429] * 10


@override_settings(AUTH_FAILURE_LIMIT=(30, 60), TRUSTED_PROXIES=["127.0.0.1", "10.0.0.0/8"])
async def test_a_named_proxy_forwards_each_client_and_anyone_else_is_counted_as_itself() -> None:
    app = _served_app()

    forwarded = await _bad_keys(app, "10.1.2.3", ROTATED)
    direct = await _bad_keys(app, "192.0.2.7", ROTATED)

    assert forwarded == [401] * 40  # 40 clients, one failure each
    assert direct[30:] == [429] * 10  # not a proxy: its header is ignored

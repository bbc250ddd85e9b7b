"""The ASGI entry point: API requests skip the browser middleware, pages keep it."""

from __future__ import annotations

from typing import Any, cast

import httpx
import pytest

from flywheel.asgi import application

pytestmark = pytest.mark.django_db(transaction=True)


async def _get(path: str, **headers: str) -> httpx.Response:
    transport = httpx.ASGITransport(app=cast(Any, application))
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
        return await client.get(path, headers=headers)


async def test_api_requests_are_served_without_browser_middleware(raw_api_key: str) -> None:
    response = await _get("/api/v1/whoami", Authorization=f"Bearer {raw_api_key}")

    assert response.status_code == 200
    assert response.json()["tenant"]["slug"] == "acme"
    assert "x-frame-options" not in response.headers  # no XFrameOptionsMiddleware here


async def test_pages_keep_the_full_middleware_stack() -> None:
    response = await _get("/admin/login/")

    assert response.status_code == 200
    assert response.headers["x-frame-options"] == "DENY"
    assert "csrftoken" in response.headers.get("set-cookie", "")


async def test_static_files_are_served() -> None:
    response = await _get("/static/admin/css/base.css")

    assert response.status_code == 200

"""The ASGI entry point: API requests skip the browser middleware, pages keep it."""

from __future__ import annotations

import asyncio
import gc
from typing import Any, cast

import httpx
import pytest
from asgiref.sync import sync_to_async
from django.test import override_settings

from flywheel.asgi import application
from flywheel.asyncdb import db
from routing.models import RoutingDecision
from routing.recording.spool import Spool
from routing.recording.writer import decision_spool, drain
from tests.captured import response
from tests.routing_world import FW_ANSWER, World

REVIEW = "Please review my pull request"

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


async def _post(path: str, payload: Any, host: str = "127.0.0.1", **headers: str) -> httpx.Response:
    transport = httpx.ASGITransport(app=cast(Any, application))
    async with httpx.AsyncClient(transport=transport, base_url=f"http://{host}") as client:
        return await client.post(path, json=payload, headers=headers)


async def test_the_fast_lane_answers_queries(world: World, raw_api_key: str) -> None:
    response = await _post(
        "/api/v1/query", {"question": REVIEW}, Authorization=f"Bearer {raw_api_key}"
    )

    body = response.json()
    assert response.status_code == 200, body
    assert body["answer"] == FW_ANSWER
    assert body["trace_url"] == f"http://127.0.0.1/decisions/{body['request_id']}"
    await sync_to_async(drain)()
    successes = await db(RoutingDecision.objects.filter(outcome="success").count)()
    assert successes == 1


async def test_the_fast_lane_speaks_the_error_shape(world: World, raw_api_key: str) -> None:
    no_key = await _post("/api/v1/query", {"question": REVIEW})
    bad = await _post("/api/v1/query", {"question": ""}, Authorization=f"Bearer {raw_api_key}")

    assert no_key.status_code == 401
    assert no_key.headers["www-authenticate"].startswith("Bearer")
    assert no_key.json()["error"]["type"] == "AuthenticationError"
    assert bad.status_code == 400
    assert "question" in bad.json()["error"]["details"]["fields"]


@pytest.mark.parametrize("public_url", ["", "https://flywheel.example"])
@pytest.mark.parametrize(
    "path", ["/api/v1/query", "/api/v1/route", "/api/v1/whoami", "/api/v1/decisions"]
)
async def test_a_foreign_host_is_refused_up_front_on_every_api_path(
    world: World, raw_api_key: str, public_url: str, path: str
) -> None:
    # With a public URL nothing on the way builds a URL from the Host: the check must not
    # depend on that.
    with override_settings(PUBLIC_URL=public_url):
        response = await _post(
            path, {"question": REVIEW}, host="evil.example", Authorization=f"Bearer {raw_api_key}"
        )

    assert response.status_code == 400
    assert response.json()["error"] == {
        "type": "BadRequest",
        "message": "The Host header names a host this server does not serve.",
        "details": {"host": "evil.example"},
    }
    await sync_to_async(drain)()
    assert not await db(RoutingDecision.objects.exists)()
    assert not world.fw_route.called


@pytest.mark.parametrize("path", ["/admin/login/", "/static/admin/css/base.css"])
async def test_pages_refuse_a_foreign_host_with_djangos_page(path: str) -> None:
    transport = httpx.ASGITransport(app=cast(Any, application))
    async with httpx.AsyncClient(transport=transport, base_url="http://evil.example") as client:
        response = await client.get(path)

    assert response.status_code == 400
    assert response.headers["content-type"].startswith("text/html")


async def test_a_public_url_still_answers_the_hosts_it_serves(
    world: World, raw_api_key: str
) -> None:
    with override_settings(PUBLIC_URL="https://flywheel.example"):
        response = await _post(
            "/api/v1/query", {"question": REVIEW}, Authorization=f"Bearer {raw_api_key}"
        )

    assert response.status_code == 200
    assert response.json()["trace_url"].startswith("https://flywheel.example/decisions/")
    await sync_to_async(drain)()


@pytest.mark.parametrize(
    "path",
    [
        "/static/..%2f..%2fetc%2fpasswd",
        "/static/admin/..%2f..%2f..%2f..%2f..%2fetc%2fpasswd",
        "/static/..%2fflywheel%2fsettings.py",
        "/static/%00",
    ],
)
async def test_a_static_path_that_leaves_the_static_root_is_not_found(path: str) -> None:
    response = await _get(path)

    assert response.status_code == 404
    assert "root:" not in response.text


@pytest.mark.parametrize(
    ("content", "content_type", "status"),
    [
        (
            '{"question": "q", "parameters": ' + '{"a": ' * 100_000 + "1" + "}" * 100_001,
            "json",
            400,
        ),
        ('{"question": "hello\\u0000world"}', "json", 400),
        ('{"question": "q", "parameters": {"temperature": NaN}}', "json", 400),
        ('{"question": "Please review my pull request"}', "text/plain", 415),
    ],
    ids=["nested 100000 deep", "NUL", "NaN", "not JSON"],
)
async def test_the_fast_lane_refuses_bodies_in_the_error_shape(
    world: World, raw_api_key: str, content: str, content_type: str, status: int
) -> None:
    transport = httpx.ASGITransport(app=cast(Any, application))
    headers = {
        "Authorization": f"Bearer {raw_api_key}",
        "Content-Type": "application/json" if content_type == "json" else content_type,
    }
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
        response = await client.post("/api/v1/query", content=content, headers=headers)

    assert response.status_code == status
    assert response.json()["error"]["type"] in {"ValidationError", "UnsupportedMediaType"}
    await sync_to_async(drain)()
    assert not await db(RoutingDecision.objects.exists)()


async def test_the_fast_lane_streams(world: World, raw_api_key: str) -> None:
    world.fw_route.mock(return_value=response("flowise", "prediction_agentflow_stream"))

    streamed = await _post(
        "/api/v1/query",
        {"question": REVIEW, "parameters": {"stream": True}},
        Authorization=f"Bearer {raw_api_key}",
    )

    assert streamed.headers["content-type"] == "text/event-stream"
    assert [line for line in streamed.text.splitlines() if line.startswith("event:")] == [
        "event: chunk",
        "event: end",
    ]
    await sync_to_async(drain)()


async def test_the_dry_run_takes_the_fast_lane_too(world: World, raw_api_key: str) -> None:
    routed = await _post(
        "/api/v1/route", {"question": REVIEW}, Authorization=f"Bearer {raw_api_key}"
    )

    assert routed.status_code == 200
    assert routed.json()["selected"]["backend"] == "fw"


async def test_startup_freezes_and_shutdown_closes_clients_and_lets_decisions_land(
    world: World, raw_api_key: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from backends.adapters import _pools

    monkeypatch.setattr(Spool, "ROTATE_SECONDS", 3600.0)  # only the stop deletes its segment

    transport = httpx.ASGITransport(app=cast(Any, application))
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
        answered = await client.post(
            "/api/v1/query",
            json={"question": REVIEW},
            headers={"Authorization": f"Bearer {raw_api_key}"},
        )
    assert answered.status_code == 200
    loop = asyncio.get_running_loop()
    assert _pools.get(loop), "the query pooled a backend client in this loop"

    messages = iter([{"type": "lifespan.startup"}, {"type": "lifespan.shutdown"}])
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return next(messages)

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    gc.unfreeze()  # so that what is frozen below was frozen by start-up
    try:
        await application({"type": "lifespan"}, receive, send)
        frozen = gc.get_freeze_count()
    finally:
        gc.unfreeze()

    assert frozen > 0, "start-up's objects are out of the collector's sight"
    assert [m["type"] for m in sent] == [
        "lifespan.startup.complete",
        "lifespan.shutdown.complete",
    ]
    assert loop not in _pools
    request_id = answered.json()["request_id"]
    assert await db(RoutingDecision.objects.filter(request_id=request_id).exists)()
    # Its spool segment, all committed, is gone: a clean stop leaves nothing to replay
    # (before, uvicorn re-raised its signal after shutdown and the exit hook never ran).
    assert list(decision_spool().directory.glob("*.jsonl")) == []

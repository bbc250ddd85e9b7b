"""How Flywheel is served: whose forwarded headers count, and the server's read limits."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any, cast

import httpx
import pytest
import uvicorn
from django.test import override_settings
from prometheus_client import REGISTRY

from flywheel import ratelimit
from flywheel.asgi import application
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


# --- the server's read limits, on real sockets ---------------------------------------


@dataclass
class Served:
    port: int

    def connect(self) -> socket.socket:
        return socket.create_connection(("127.0.0.1", self.port), timeout=5)


@pytest.fixture
def served(settings: Any) -> Iterator[Served]:
    """Flywheel served by uvicorn in a thread, with short read limits, on a free port."""
    settings.HEADER_TIMEOUT_SECONDS = 0.5
    settings.BODY_TIMEOUT_SECONDS = 0.5
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = int(probe.getsockname()[1])
    config = uvicorn.Config(
        APPLICATION, host="127.0.0.1", port=port, lifespan="off", log_config=None,
        timeout_graceful_shutdown=1,
        **uvicorn_options(),
    )  # fmt: skip
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        assert time.monotonic() < deadline, "the server did not start"
        time.sleep(0.01)
    yield Served(port)
    server.should_exit = True
    thread.join(timeout=10)


def _answer(sock: socket.socket, wait: float = 3.0) -> tuple[bytes, float]:
    """What the server sends until it closes the connection (or ``wait`` passes), and
    how long that took."""
    sock.settimeout(wait)
    started = time.monotonic()
    received = b""
    try:
        while chunk := sock.recv(65536):
            received += chunk
    except TimeoutError:
        pass
    except ConnectionResetError:
        pass
    return received, time.monotonic() - started


def _status_and_error(answer: bytes) -> tuple[int, dict[str, Any]]:
    head, _, body = answer.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    if b"transfer-encoding: chunked" in head.lower():
        size, _, rest = body.partition(b"\r\n")
        body = rest[: int(size, 16)]
    return status, json.loads(body)["error"]


def test_a_half_sent_request_is_closed_after_the_header_timeout(served: Served) -> None:
    with served.connect() as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n")  # no blank line
        answer, took = _answer(sock)

    assert answer.startswith(b"HTTP/1.1 408 ")
    assert 0.4 < took < 1.5


def test_headers_trickled_a_byte_at_a_time_meet_the_same_deadline(served: Served) -> None:
    with served.connect() as sock:
        started = time.monotonic()
        try:
            for byte in b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: " + b"a" * 40:
                sock.sendall(bytes([byte]))
                time.sleep(0.05)
        except (BrokenPipeError, ConnectionResetError):
            pass
        answer, _ = _answer(sock)

    assert answer.startswith(b"HTTP/1.1 408 ")
    assert time.monotonic() - started < 2.0


def test_an_idle_connection_is_closed_after_the_header_timeout(served: Served) -> None:
    with served.connect() as sock:
        answer, took = _answer(sock)

    assert answer == b""  # nothing was asked: closed without an answer
    assert 0.4 < took < 1.5


def test_headers_past_their_size_limit_are_refused(served: Served) -> None:
    with served.connect() as sock:
        try:
            sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n")
            for _ in range(64):
                sock.sendall(b"X-Big: " + b"a" * 16384 + b"\r\n")
        except (BrokenPipeError, ConnectionResetError):
            pass
        answer, _ = _answer(sock)

    assert answer.startswith(b"HTTP/1.1 431 ")


def test_a_body_declared_over_the_limit_is_refused_before_it_is_read(served: Served) -> None:
    with served.connect() as sock:
        sock.sendall(
            b"POST /api/v1/backends HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            b"Content-Type: application/json\r\nContent-Length: 300000000\r\n\r\n"
        )
        answer, took = _answer(sock)  # not one byte of the body sent

    status, error = _status_and_error(answer)
    assert status == 413
    assert error["type"] == "PayloadTooLarge"
    assert error["details"] == {"max_bytes": 2621440}
    assert b"connection: close" in answer.lower()
    assert took < 1.0


def test_a_streamed_body_past_the_limit_is_refused_and_no_more_is_read(served: Served) -> None:
    chunk = b"a" * 65536
    sent = 0
    with served.connect() as sock:
        sock.sendall(
            b"POST /api/v1/query HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            b"Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
        )
        try:
            while sent < 300_000_000:
                sock.sendall(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                sent += len(chunk)
        except (BrokenPipeError, ConnectionResetError, TimeoutError):
            pass
        answer, _ = _answer(sock)

    assert sent < 16 * 2**20  # the server stopped reading soon after the limit
    status, error = _status_and_error(answer)
    assert status == 413
    assert error["type"] == "PayloadTooLarge"


def test_a_body_that_stops_coming_is_refused_after_the_body_timeout(served: Served) -> None:
    with served.connect() as sock:
        sock.sendall(
            b"POST /api/v1/backends HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            b'Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{"name": '
        )
        answer, took = _answer(sock)

    status, error = _status_and_error(answer)
    assert status == 408
    assert error["type"] == "RequestTimeout"
    assert 0.4 < took < 1.5


def test_requests_within_the_limits_are_served_on_one_kept_alive_connection(
    served: Served,
) -> None:
    body = b'{"question": "' + b"a" * 2_000_000 + b'"}'
    with httpx.Client(base_url=f"http://127.0.0.1:{served.port}") as http:
        first = http.get("/healthz")
        asked = http.post(
            "/api/v1/query", content=body, headers={"Content-Type": "application/json"}
        )
        again = http.get("/healthz")

    assert (first.status_code, asked.status_code, again.status_code) == (200, 401, 200)
    assert asked.json()["error"]["type"] == "AuthenticationError"


@override_settings(MAX_BODY_BYTES=1000)
async def test_the_application_refuses_a_body_over_the_limit_whatever_serves_it() -> None:
    counted = REGISTRY.get_sample_value(
        "flywheel_requests_total", {"door": "rest", "status": "413"}
    )

    async def body() -> AsyncIterator[bytes]:  # streamed: no Content-Length
        for _ in range(4):
            yield b"a" * 400

    transport = httpx.ASGITransport(app=cast(Any, application))
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as http:
        declared = await http.post("/api/v1/backends", content=b"a" * 1001)
        streamed = await http.post("/api/v1/query", content=body())

    for refused in (declared, streamed):
        assert refused.status_code == 413
        assert refused.headers["connection"] == "close"
        assert refused.json()["error"] == {
            "type": "PayloadTooLarge",
            "message": "The request body is larger than 1000 bytes.",
            "details": {"max_bytes": 1000},
        }
    after = REGISTRY.get_sample_value("flywheel_requests_total", {"door": "rest", "status": "413"})
    assert (after or 0) - (counted or 0) == 2

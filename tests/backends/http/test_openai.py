"""The OpenAI-compatible helper (backends/http/openai.py) on real sockets, and the LLM and
embeddings calling out through it.

Servers run on loopback in the test's own loop, as in test_transport.py; the
product's transport carries the requests (not the suite's httpx mocks), so
what is checked is the bytes on the wire, the deadline and the errors.
"""

from __future__ import annotations

import asyncio
import json
import logging
import socket
import time
from typing import Any

import pytest
from django.test import override_settings

from backends.errors import BackendConnectionError
from backends.http import (
    BlockingOpenAIClient,
    NetworkTransport,
    OpenAIClient,
    OpenAIEndpoint,
    close_endpoints,
    openai,
)
from backends.http import client as http
from backends.http.openai import (
    AnswerTooLarge,
    ConfigurationError,
    ConnectError,
    DecodingError,
    HTTPStatusError,
    TimeoutException,
)
from routing.classification import llm
from tests.backends.http.test_transport import _get, _response, server

KEY = "sk-LLM-SECRET-on-the-wire"
CHAT = {"choices": [{"message": {"role": "assistant", "content": "technical-analysis"}}]}


@pytest.fixture(autouse=True)
def real_network(monkeypatch: pytest.MonkeyPatch) -> None:
    """The product's transport, not the suite's httpx mocks."""
    monkeypatch.setattr(
        http,
        "network_transport",
        lambda *, restricted=False: NetworkTransport(restricted=restricted),
    )


def _answering(status: int, body: bytes, seen: list[dict[str, Any]] | None = None) -> Any:
    async def handler(request: dict[str, Any], writer: asyncio.StreamWriter) -> None:
        if seen is not None:
            seen.append(request)
        writer.write(_response(status, body, {"Content-Type": "application/json"}))

    return handler


def _post(handler: Any, *, deadline: float | None = 2.0, api_key: str = KEY) -> Any:
    """POST a chat completion to a loopback server through OpenAIClient: its answer."""

    async def run() -> Any:
        async with server(handler) as url:
            client = OpenAIClient(
                OpenAIEndpoint(f"{url}/v1", api_key, name="LLM endpoint"), timeout_seconds=5.0
            )
            try:
                return await client.post_json(
                    "/chat/completions", {"model": "m"}, deadline_seconds=deadline
                )
            finally:
                await client.aclose()

    return asyncio.run(run())


def test_a_json_post_carries_the_bearer_key_and_returns_the_answer() -> None:
    seen: list[dict[str, Any]] = []

    answer = _post(_answering(200, json.dumps(CHAT).encode(), seen))

    assert answer == CHAT
    (request,) = seen
    assert (request["method"], request["target"]) == ("POST", "/v1/chat/completions")
    assert request["headers"]["authorization"] == f"Bearer {KEY}"
    assert request["headers"]["content-type"] == "application/json"
    assert json.loads(request["body"]) == {"model": "m"}


def test_without_a_key_no_authorization_is_sent() -> None:
    seen: list[dict[str, Any]] = []

    _post(_answering(200, b"{}", seen), api_key="")

    assert "authorization" not in seen[0]["headers"]


def test_an_error_status_is_an_http_status_error_without_the_body_or_the_key() -> None:
    body = json.dumps({"error": {"message": f"invalid key {KEY}"}}).encode()

    with pytest.raises(HTTPStatusError) as raised:
        _post(_answering(401, body))

    assert raised.value.status_code == 401
    assert str(raised.value) == "The LLM endpoint answered with HTTP 401."


def test_an_answer_that_is_not_json_is_a_decoding_error() -> None:
    with pytest.raises(DecodingError) as raised:
        _post(_answering(200, b"<html>gateway</html>"))

    assert "<html>" not in str(raised.value)


def test_an_answer_past_the_endpoints_limit_is_answer_too_large(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(openai, "ENDPOINT_ANSWER_BYTES", 100)

    with pytest.raises(AnswerTooLarge):
        _post(_answering(200, json.dumps({"data": "x" * 100}).encode()))


def test_a_closed_port_is_a_connect_error_and_the_key_is_in_no_log_line(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]

    async def run() -> None:
        endpoint = OpenAIEndpoint(f"http://127.0.0.1:{port}/v1", KEY, name="LLM endpoint")
        client = OpenAIClient(endpoint, timeout_seconds=1.0)
        try:
            await client.post_json("/chat/completions", {}, deadline_seconds=1.0)
        finally:
            await client.aclose()

    with caplog.at_level(logging.DEBUG), pytest.raises(ConnectError) as raised:
        asyncio.run(run())

    assert "LLM endpoint: POST /v1/chat/completions failed" in caplog.text
    assert KEY not in caplog.text
    assert KEY not in str(raised.value)
    assert KEY not in repr(OpenAIEndpoint("http://x", KEY))


def test_a_key_that_cannot_be_sent_is_refused_before_sending() -> None:
    seen: list[dict[str, Any]] = []

    with pytest.raises(ConfigurationError):
        _post(_answering(200, b"{}", seen), api_key="sk-x\r\nX-Injected: yes")

    assert seen == []


def test_the_deadline_bounds_the_whole_call_not_each_wait() -> None:
    """An answer trickling in a byte every 0.1 s never leaves the per-wait timer idle
    for long; the deadline still ends the call at 0.5 s (seed 004, AC 6)."""

    async def trickle(request: dict[str, Any], writer: asyncio.StreamWriter) -> None:
        body = json.dumps(CHAT).encode()
        writer.write(f"HTTP/1.1 200 OK\r\nContent-Length: {len(body)}\r\n\r\n".encode())
        for i in range(len(body)):
            await writer.drain()
            await asyncio.sleep(0.1)
            writer.write(body[i : i + 1])

    started = time.monotonic()
    with pytest.raises(TimeoutException):
        _post(trickle, deadline=0.5)

    assert time.monotonic() - started < 1.5


def test_the_blocking_client_posts_from_sync_code_on_one_connection() -> None:
    connections: list[int] = []
    seen: list[dict[str, Any]] = []

    def in_sync_code(url: str) -> list[Any]:
        with BlockingOpenAIClient(OpenAIEndpoint(f"{url}/v1", KEY)) as client:
            return [client.post_json("/embeddings", {"input": [str(i)]}) for i in range(3)]

    async def run() -> list[Any]:
        async with server(_answering(200, b'{"data": []}', seen), connections) as url:
            return await asyncio.to_thread(in_sync_code, url)

    answers = asyncio.run(run())

    assert answers == [{"data": []}] * 3
    assert [json.loads(r["body"])["input"] for r in seen] == [["0"], ["1"], ["2"]]
    assert len(connections) == 1


# --- the operator's endpoint and the address guard -------------------------------------------


def test_an_operators_llm_on_loopback_answers_where_a_tenants_backend_may_not_connect() -> None:
    """LLM_BASE_URL comes from the operator's environment: trusted, like a staff-registered
    backend, so a local model on 127.0.0.1 is reached; a backend a tenant registered at the
    same address is refused at connect time, as ever."""
    seen: list[dict[str, Any]] = []
    answering = _answering(200, json.dumps(CHAT).encode(), seen)

    async def run() -> tuple[str | None, Any]:
        async with server(answering) as url:
            with override_settings(LLM_BASE_URL=f"{url}/v1", LLM_API_KEY=KEY):
                config = llm.llm_config()
                assert config is not None
                try:
                    label = await llm.llm_intent(config, "thoughts?", {"technical-analysis": "x"})
                finally:
                    await close_endpoints()
            refused: Any
            try:
                refused = await asyncio.to_thread(_get, url, restricted=True)
            except BackendConnectionError as err:
                refused = err
        return label, refused

    label, refused = asyncio.run(run())

    assert label == "technical-analysis"
    assert len(seen) == 1
    assert isinstance(refused, BackendConnectionError)
    assert refused.details["failure"] == "address"

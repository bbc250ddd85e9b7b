"""``manage.py runmcp`` as agents run it: a real subprocess, over stdio and streamable HTTP.

The subprocess uses this suite's test database and cache prefix; its backend
is a stand-in Flowise on loopback (bench/standin.py, registered as trusted,
as staff register loopback servers), so a question is really answered.
"""

from __future__ import annotations

import contextlib
import json
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import httpx2
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from backends.models import BackendHealth
from backends.services import backend_create
from chatflows.models import Flow
from flywheel.asyncdb import db
from flywheel.models import ApiKey, Tenant
from flywheel.services import api_key_create, api_key_revoke
from routing.install import defaults_load
from routing.models import RoutingDecision
from tests.paths import ROOT
from tests.routing_world import refresh
from tests.served import START_TIMEOUT, free_port, server_env, standing_in, wait_until_up

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def standin() -> Iterator[int]:
    with standing_in() as port:
        yield port


def runmcp(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(  # noqa: S603 - our own interpreter and manage.py
        [sys.executable, "manage.py", "runmcp", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=START_TIMEOUT,
        stdin=subprocess.DEVNULL,
        check=False,
    )


@dataclass
class Served:
    key: str
    tenant: Tenant


@pytest.fixture
def hung() -> Iterator[int]:
    """A server that accepts connections and never answers."""
    listener = socket.create_server(("127.0.0.1", 0))
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(listener.accept()[0])
            except TimeoutError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield int(listener.getsockname()[1])
    finally:
        stop.set()
        thread.join(timeout=5)
        for conn in held:
            conn.close()
        listener.close()


@pytest.fixture
def served(standin: int, hung: int, tenant: Tenant) -> Served:
    """A shared stand-in Flowise with one generic flow, and a shared backend that never
    answers (timeout 0.5 s) with a code-review flow, both published for routing."""
    defaults_load()
    for name, port, flow in (
        ("standin", standin, {"is_generic": True, "intent_keywords": ["general"]}),
        ("hung", hung, {"intent_keywords": ["code-review"]}),
    ):
        backend = backend_create(
            name=name,
            kind="flowise",
            base_url=f"http://127.0.0.1:{port}",
            trusted=True,
            timeout_seconds=0.5,
        )
        BackendHealth.objects.create(backend=backend, healthy=True)
        Flow.objects.create(
            backend=backend, external_id=f"{name}-flow", name=name, deployed=True, **flow
        )
    refresh()
    return Served(api_key_create(tenant=tenant, name="mcp")[1], tenant)


# --- stdio -----------------------------------------------------------------------------------


async def test_stdio_lists_the_tools_and_answers_a_question(served: Served) -> None:
    params = StdioServerParameters(
        command=sys.executable,
        args=["manage.py", "runmcp"],
        cwd=str(ROOT),
        env=server_env(FLYWHEEL_API_KEY=served.key),
    )

    async with Client(params, read_timeout_seconds=START_TIMEOUT) as client:
        tools = {t.name for t in (await client.list_tools()).tools}
        result = await client.call_tool("universal_query", {"question": "hello over stdio"})
        timed_out = await client.call_tool(
            "universal_query",
            {"question": "hello?", "backend": "hung", "intent": "code-review", "fallback": False},
        )

    assert {"universal_query", "list_chatflows", "generate_agentflow_v2"} <= tools
    assert not result.is_error, result.content
    assert result.structured_content["answer"] == "Echo: hello over stdio"
    assert result.structured_content["routing"]["backend"] == "standin"
    failed = json.loads(timed_out.content[0].text)["error"]  # type: ignore[union-attr]
    assert failed["type"] == "AllBackendsFailed"
    assert [a["error_type"] for a in failed["details"]["fallback_chain"]] == ["TimeoutError"]


async def test_stdio_counts_reach_the_webs_metrics_through_the_shared_directory(
    served: Served, tmp_path: Path
) -> None:
    """runmcp is a process of its own: sharing the web's PROMETHEUS_MULTIPROC_DIR is how
    its calls and its decisions reach /metrics."""
    shared = tmp_path / "metrics"
    shared.mkdir()
    params = StdioServerParameters(
        command=sys.executable,
        args=["manage.py", "runmcp"],
        cwd=str(ROOT),
        env=server_env(FLYWHEEL_API_KEY=served.key, PROMETHEUS_MULTIPROC_DIR=str(shared)),
    )
    async with Client(params, read_timeout_seconds=START_TIMEOUT) as client:
        await client.call_tool("universal_query", {"question": "hello over stdio"})

    scrape = "import django; django.setup(); from flywheel.metrics import exposition;" + (
        "print(exposition()[0].decode())"
    )
    printed = subprocess.run(  # noqa: S603 - our own interpreter
        [sys.executable, "-c", scrape],
        cwd=ROOT,
        env=server_env(PROMETHEUS_MULTIPROC_DIR=str(shared)),
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert 'flywheel_requests_total{door="mcp",status="ok"} 1.0' in printed
    decided = [line for line in printed.splitlines() if line.startswith("flywheel_decisions")]
    assert any(
        'backend="standin"' in line and 'owner="shared"' in line and "backend_id=" in line
        for line in decided
    )


def _refusal(completed: subprocess.CompletedProcess[str]) -> str:
    assert completed.returncode != 0
    assert completed.stdout == ""  # stdout belongs to the protocol
    lines = completed.stderr.strip().splitlines()
    assert len(lines) == 1, completed.stderr
    return lines[0]


def test_stdio_without_a_key_refuses_to_start_in_one_line(db: None) -> None:
    line = _refusal(runmcp(env=server_env()))

    assert "FLYWHEEL_API_KEY" in line


def test_a_refused_key_is_named_where_it_was_given(tenant: Tenant) -> None:
    for args, env, source in (
        (["--api-key", "fw_bad"], {}, "The key in --api-key was refused"),
        ([], {"FLYWHEEL_API_KEY": "fw_bad"}, "The key in FLYWHEEL_API_KEY was refused"),
    ):
        line = _refusal(runmcp(*args, env=server_env(**env)))
        assert line.startswith(f"CommandError: {source}:"), line


def test_stdio_with_a_revoked_key_refuses_to_start_in_one_line(tenant: Tenant) -> None:
    _, raw_key = api_key_create(tenant=tenant, name="old")
    api_key_revoke(api_key=ApiKey.objects.get(name="old"))

    line = _refusal(runmcp(env=server_env(FLYWHEEL_API_KEY=raw_key)))

    assert "revoked" in line
    assert raw_key not in line


# --- streamable HTTP ---------------------------------------------------------------------------


@contextlib.contextmanager
def serving_http(env: dict[str, str]) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """``runmcp --transport streamable-http`` on a free port: its URL and its process."""
    port = free_port()
    command = [sys.executable, "manage.py", "runmcp", "--transport", "streamable-http"]
    process = subprocess.Popen(  # noqa: S603
        [*command, "--port", str(port)], cwd=ROOT, env=env, stdin=subprocess.DEVNULL
    )
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        wait_until_up(url, process, method="POST")
        yield url, process
    finally:
        process.terminate()
        process.wait(timeout=20)


@pytest.fixture
def http_server(served: Served) -> Iterator[str]:
    with serving_http(server_env()) as (url, _):
        yield url


async def test_http_with_a_key_lists_the_tools_and_answers(
    http_server: str, served: Served
) -> None:
    headers = {"Authorization": f"Bearer {served.key}"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=30) as http,
        Client(streamable_http_client(http_server, http_client=http)) as client,
    ):
        tools = {t.name for t in (await client.list_tools()).tools}
        result = await client.call_tool("universal_query", {"question": "hello over http"})
        session = result.structured_content["session_id"]  # continued: a conversation
        await client.call_tool("universal_query", {"question": "and again", "session_id": session})
        sessions = await client.call_tool("list_sessions", {})

    assert "universal_query" in tools
    assert result.structured_content["answer"] == "Echo: hello over http"
    listed = sessions.structured_content["result"]
    assert [s["first_question"] for s in listed] == ["hello over http"]  # the key's tenant's
    assert [s["turn_count"] for s in listed] == [2]


async def test_http_stopped_by_sigterm_leaves_nothing_in_the_spool(
    served: Served, tmp_path: Path
) -> None:
    """A clean stop writes what it answered and deletes its committed spool segments,
    so the next process has nothing to replay (it once left them behind)."""
    headers = {"Authorization": f"Bearer {served.key}"}
    with serving_http(server_env(FLYWHEEL_SPOOL_DIR=str(tmp_path))) as (url, process):
        async with (
            httpx2.AsyncClient(headers=headers, timeout=30) as http,
            Client(streamable_http_client(url, http_client=http)) as client,
        ):
            result = await client.call_tool("universal_query", {"question": "spooled, then"})
        assert list(tmp_path.iterdir()), "the answer's decision went through the spool"
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=20)

    request_id = result.structured_content["request_id"]
    assert await db(RoutingDecision.objects.filter(request_id=request_id).exists)()
    assert list(tmp_path.glob("*/*.jsonl")) == []


def test_http_without_a_valid_key_is_refused_in_the_error_shape(http_server: str) -> None:
    for authorization in (None, "Bearer fw_00000000_not-a-key", "Basic abc"):
        headers = {"Accept": "application/json, text/event-stream"}
        if authorization:
            headers["Authorization"] = authorization

        refused = httpx.post(
            http_server,
            json={"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}},
            headers=headers,
            timeout=10,
        )

        assert refused.status_code == 401, authorization
        assert refused.headers["www-authenticate"].startswith("Bearer")
        assert refused.json()["error"]["type"] == "AuthenticationError"
        assert set(refused.json()["error"]) == {"type", "message", "details"}

"""Flywheel and a stand-in backend as real processes on loopback, for the tests whose
clients are processes of their own (MCP over stdio and HTTP, Flowise's SDK under node).

The Flywheel process uses this suite's test database and cache prefix (server_env);
the stand-in is bench/standin.py, a Flowise that echoes the question.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator

import httpx
from django.db import connection

from tests.paths import ROOT

START_TIMEOUT = 60.0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def database_url() -> str:
    """The test database this suite runs on (pytest-django made it)."""
    db = connection.settings_dict
    auth = db["USER"] + (f":{db['PASSWORD']}" if db["PASSWORD"] else "")
    return f"postgres://{auth}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"


def server_env(**extra: str) -> dict[str, str]:
    """What a client config passes: stdio_client itself passes only HOME, PATH, ..."""
    env = {k: v for k, v in os.environ.items() if k != "FLYWHEEL_API_KEY"}
    return {**env, "DATABASE_URL": database_url(), "PYTHONUNBUFFERED": "1", **extra}


def wait_until_up(url: str, process: subprocess.Popen[bytes], method: str = "GET") -> None:
    """Until ``url`` answers at all (any status), ``process`` serving it; raises if the
    process ends first or START_TIMEOUT passes."""
    deadline = time.monotonic() + START_TIMEOUT
    while True:
        try:
            httpx.request(method, url, json={} if method == "POST" else None, timeout=1)
            return
        except httpx.HTTPError:
            if time.monotonic() > deadline or process.poll() is not None:
                raise
            time.sleep(0.1)


@contextlib.contextmanager
def standing_in() -> Iterator[int]:
    """A stand-in Flowise (bench/standin.py) on a free port: its port."""
    port = free_port()
    process = subprocess.Popen(  # noqa: S603
        [sys.executable, "bench/standin.py", str(port), "0"],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_until_up(f"http://127.0.0.1:{port}/api/v1/ping", process)
        yield port
    finally:
        process.terminate()
        process.wait(timeout=10)


@contextlib.contextmanager
def serving_web(env: dict[str, str]) -> Iterator[str]:
    """Flywheel's web (uvicorn, one worker) on a free port: its base URL."""
    port = free_port()
    command = [sys.executable, "-m", "uvicorn", "flywheel.asgi:application", "--port", str(port)]
    process = subprocess.Popen(  # noqa: S603 - our own interpreter
        [*command, "--lifespan", "on", "--log-level", "warning"], cwd=ROOT, env=env
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until_up(f"{url}/healthz", process)
        yield url
    finally:
        process.terminate()
        process.wait(timeout=20)

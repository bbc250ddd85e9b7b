"""Make sure PostgreSQL (DATABASE_URL) and Redis (REDIS_URL) answer.

A service that is installed on this machine but stopped is started; one that
is absent stops the run with one line naming what is missing.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit

LOCAL_HOSTS = {"127.0.0.1", "localhost", "::1", ""}


def _answers(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host or "127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


def _start_postgres() -> list[str] | None:
    if not shutil.which("pg_ctlcluster"):
        return None
    versions = sorted(p.name for p in Path("/etc/postgresql").glob("*"))
    if not versions:
        return None
    return ["pg_ctlcluster", "--skip-systemctl-redirect", versions[-1], "main", "start"]


def _start_redis(port: int) -> list[str] | None:
    if not shutil.which("redis-server"):
        return None
    return [
        "redis-server", "--daemonize", "yes", "--bind", "127.0.0.1", "--port", str(port),
        "--save", "", "--appendonly", "no",
    ]  # fmt: skip


def ensure(name: str, url: str, default_port: int, starter: list[str] | None) -> str | None:
    """Return None when the service answers, else the reason it does not."""
    parts = urlsplit(url)
    host, port = parts.hostname or "127.0.0.1", parts.port or default_port
    if _answers(host, port):
        return None
    if host not in LOCAL_HOSTS:
        return f"{name} does not answer at {host}:{port} ({url})"
    if starter is None:
        return (
            f"{name} is not installed and nothing answers at {host}:{port}; "
            "install it or point the URL at a running server"
        )
    print(f"{name} is stopped; starting it: {' '.join(starter)}", file=sys.stderr)
    subprocess.run(starter, check=False, stdout=subprocess.DEVNULL)  # noqa: S603
    for _ in range(40):
        if _answers(host, port):
            return None
        time.sleep(0.5)
    return f"{name} did not start on {host}:{port}"


def main() -> int:
    database_url = os.environ.get("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/flywheel")
    redis_url = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379")
    if not database_url.startswith(("postgres://", "postgresql://")):
        print(f"error: the test suite runs on PostgreSQL; DATABASE_URL is {database_url}")
        return 1
    redis_port = urlsplit(redis_url).port or 6379
    problems = [
        ensure("PostgreSQL", database_url, 5432, _start_postgres()),
        ensure("Redis", redis_url, 6379, _start_redis(redis_port)),
    ]
    for problem in filter(None, problems):
        print(f"error: {problem}", file=sys.stderr)
    return 1 if any(problems) else 0


if __name__ == "__main__":
    sys.exit(main())

"""Several made-up Flowise servers in one process, one port each, for bench/learning_http.py.

Each backend of a scenario (bench/learning_scenarios.py) listens on a port of
its own and answers what Flywheel asks a Flowise server (the shapes of
bench/standin.py and tests/fixtures/flowise): ``GET /api/v1/ping`` ("pong"),
``GET /api/v1/chatflows`` (one deployed chatflow per intent of its profile,
id ``<backend>-<intent>``, for discovery) and ``POST /api/v1/prediction/<id>``.
A prediction follows the backend's hidden profile for the flow's intent: it
answers (200) with the profile's success probability, after a log-normal time
around its median; otherwise it fails with HTTP 500 after the profile's
failure time. Times are the profile's seconds times ``--scale``.

The profiles are set, and changed at a scenario's drift, by the benchmark:
``POST /_profiles {"R1": {"general": {"success": 0.9, "median": 0.2, ...}}}``
on any of the ports replaces the profiles of the backends it names
(``set_profiles``; ``fleet`` starts the process and stops it).

Run: python bench/flowise_fleet.py [--scale X] [--seed N] NAME=PORT [NAME=PORT ...]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import random
import socket
import subprocess
import sys
from collections.abc import Iterator, Mapping
from dataclasses import asdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import start, wait_for
from bench.learning_scenarios import Profile, Profiles
from bench.loadgen import HttpConnection
from bench.serving import stop
from bench.standin import read_body, respond

JSON = b"application/json"


def draw(profile: Profile, rng: random.Random) -> tuple[bool, float]:
    """One attempt under ``profile``: whether it answers, and the seconds it takes."""
    if rng.random() < profile.success:
        return True, profile.median * math.exp(rng.gauss(0, profile.spread))
    return False, profile.fail_seconds


def flow_id(backend: str, intent: str) -> str:
    return f"{backend}-{intent}"


def chatflows(backend: str, intents: list[str]) -> list[dict[str, Any]]:
    """The backend's chatflow list, as Flowise gives it: one deployed chatflow per intent."""
    return [
        {
            "id": flow_id(backend, intent),
            "name": f"{intent} flow",
            "type": "CHATFLOW",
            "deployed": True,
            "category": "",
            "flowData": "{}",
        }
        for intent in intents
    ]


class Fleet:
    """The backends' profiles, and what a request to one of them gets."""

    def __init__(self, ports: Mapping[int, str], scale: float, seed: int) -> None:
        self.ports = dict(ports)  # port -> backend
        self.scale = scale
        self.rng = random.Random(seed)  # noqa: S311 - made-up outcomes, nothing secret
        self.profiles: dict[str, dict[str, Profile]] = {}

    def set_profiles(self, given: Mapping[str, Mapping[str, Mapping[str, float]]]) -> None:
        for backend, by_intent in given.items():
            self.profiles[backend] = {i: Profile(**p) for i, p in by_intent.items()}

    async def predict(self, backend: str, flow: str, question: str) -> tuple[int, bytes]:
        intent = flow.removeprefix(flow_id(backend, ""))
        profile = self.profiles.get(backend, {}).get(intent)
        if profile is None:
            return 404, json.dumps({"message": f"Chatflow {flow} not found"}).encode()
        ok, seconds = draw(profile, self.rng)
        await asyncio.sleep(seconds * self.scale)
        if not ok:
            return 500, b'{"message": "Internal Server Error"}'
        return 200, json.dumps({"text": f"{backend}: {question}", "sessionId": "s"}).encode()

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        body = await read_body(receive)
        backend = self.ports.get(scope["server"][1], "")
        path, method = scope["path"], scope["method"]
        status, content_type, payload = 200, JSON, b"{}"
        if path == "/_profiles":
            self.set_profiles(json.loads(body))
        elif path == "/api/v1/ping":
            content_type, payload = b"text/html", b"pong"
        elif method == "GET" and path == "/api/v1/chatflows":
            intents = list(self.profiles.get(backend, {}))
            payload = json.dumps(chatflows(backend, intents)).encode()
        elif method == "POST" and path.startswith("/api/v1/prediction/"):
            question = str(json.loads(body or b"{}").get("question", ""))
            status, payload = await self.predict(backend, path.rsplit("/", 1)[1], question)
        else:
            status, payload = 404, b'{"message": "Not found"}'
        await respond(send, status, content_type, payload)


# --- Driving it, from the benchmark ------------------------------------------------


def as_json(profiles: Profiles) -> dict[str, dict[str, dict[str, float]]]:
    """Profiles as POST /_profiles takes them."""
    return {name: {i: asdict(p) for i, p in by.items()} for name, by in profiles.items()}


@contextlib.contextmanager
def fleet(ports: dict[str, int], scale: float, seed: int) -> Iterator[subprocess.Popen[bytes]]:
    """bench/flowise_fleet.py serving every backend of the scenario, each on its port."""
    names = [f"{name}={port}" for name, port in ports.items()]
    process = start(["bench/flowise_fleet.py", "--scale", str(scale), "--seed", str(seed), *names])
    try:
        for port in ports.values():
            wait_for(f"http://127.0.0.1:{port}/api/v1/ping")
        yield process
    finally:
        stop(process)


async def set_profiles(port: int, profiles: Profiles) -> None:
    connection = await HttpConnection.open("127.0.0.1", port)
    try:
        status, body = await connection.post("/_profiles", as_json(profiles))
    finally:
        connection.close()
    if status != 200:
        raise RuntimeError(f"the fleet refused the profiles: HTTP {status} {body[:200]!r}")


# --- Serving --------------------------------------------------------------------------


def listening(port: int) -> socket.socket:
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    return sock


def main() -> None:
    import uvicorn

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    parser.add_argument("--scale", type=float, default=1.0, help="real seconds per profile second")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("backends", nargs="+", metavar="NAME=PORT")
    args = parser.parse_args()
    ports = {int(port): name for name, _, port in (b.partition("=") for b in args.backends)}
    fleet = Fleet(ports, args.scale, args.seed)
    config = uvicorn.Config(fleet, log_level="error", backlog=2048)
    uvicorn.Server(config).run(sockets=[listening(port) for port in ports])


if __name__ == "__main__":
    main()

"""Capture real Flowise and Langflow responses as test fixtures.

With the peers running and seeded (scripts/peers/start.sh, seed.py; reads
var/peers.env), sends a fixed list of requests to each real server and saves
every exchange as tests/fixtures/<server>/<name>.json:

    {"request": {"method", "path", "body"}, "status": int,
     "headers": {"content-type": ...}, "body": <parsed JSON, or the raw text when not JSON>}

API keys, passwords and JWTs are replaced by "REDACTED" wherever they appear.
Scratch flows created here are deleted again. Re-running rewrites the files
(ids, timestamps and session ids change from run to run).

    .venv/bin/python scripts/peers/capture_fixtures.py [all|flowise|langflow]

Standard library + httpx only.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import sys
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[2]
ENV_FILE = ROOT / "var/peers.env"
FIXTURES = ROOT / "tests/fixtures"
FLOWS_DIR = ROOT / "tests/peers"
UNKNOWN_UUID = "00000000-0000-0000-0000-000000000000"
SCRATCH = "fixture-scratch"
WRONG_KEY = "wrong-key-for-fixtures"
TIMEOUT = httpx.Timeout(60.0, connect=5.0)

JWT_RE = re.compile(r"eyJ[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+")
LANGFLOW_KEY_RE = re.compile(r"sk-[A-Za-z0-9_-]{20,}")


def log(message: str) -> None:
    print(f"[fixtures] {message}", file=sys.stderr, flush=True)


def read_env() -> dict[str, str]:
    if not ENV_FILE.exists():
        sys.exit(f"error: {ENV_FILE.relative_to(ROOT)} is missing; run scripts/peers/seed.py first")
    values = {}
    for line in ENV_FILE.read_text().splitlines():
        if "=" in line and not line.lstrip().startswith("#"):
            key, _, value = line.partition("=")
            parsed = shlex.split(value)
            values[key.strip()] = parsed[0] if parsed else ""
    return values


class Recorder:
    """Sends requests to one server and writes each exchange to a fixture file."""

    def __init__(
        self, server: str, base_url: str, auth: dict[str, str], secrets: list[str]
    ) -> None:
        self.server = server
        self.client = httpx.Client(base_url=base_url, timeout=TIMEOUT)
        self.auth = auth
        self.secrets = sorted({s for s in secrets if s}, key=len, reverse=True)
        self.dir = FIXTURES / server
        self.dir.mkdir(parents=True, exist_ok=True)
        self.count = 0

    def redact(self, text: str) -> str:
        for secret in self.secrets:
            text = text.replace(secret, "REDACTED")
        text = JWT_RE.sub("REDACTED", text)
        return LANGFLOW_KEY_RE.sub("REDACTED", text)

    def send(
        self, method: str, path: str, body: Any = None, auth: dict[str, str] | None = None
    ) -> httpx.Response:
        headers = self.auth if auth is None else auth
        return self.client.request(method, path, json=body, headers=headers)

    def list_flows(self, path: str) -> list[dict[str, Any]]:
        response = self.send("GET", path)
        if response.status_code != 200:
            sys.exit(f"error: {self.server} GET {path} -> {response.status_code}; re-run seed.py")
        flows: list[dict[str, Any]] = response.json()
        return flows

    def capture(
        self,
        name: str,
        method: str,
        path: str,
        body: Any = None,
        auth: dict[str, str] | None = None,
    ) -> Any:
        """Send one request, save it as <name>.json, and return the parsed body."""
        response = self.send(method, path, body, auth)
        content_type = response.headers.get("content-type")
        parsed: Any = response.text
        if content_type and "json" in content_type:
            with contextlib.suppress(ValueError):
                parsed = response.json()
        record = {
            "request": {"method": method, "path": path, "body": body},
            "status": response.status_code,
            "headers": {"content-type": content_type},
            "body": parsed,
        }
        text = self.redact(json.dumps(record, indent=2, ensure_ascii=False)) + "\n"
        (self.dir / f"{name}.json").write_text(text)
        self.count += 1
        log(f"{self.server}/{name}.json: {method} {path} -> {response.status_code}")
        return json.loads(text)["body"]


def capture_flowise(env: dict[str, str]) -> None:
    key = env["FLOWISE_API_KEY"]
    agentflow, chatflow = env["FLOWISE_AGENTFLOW_ID"], env["FLOWISE_CHATFLOW_ID"]
    secrets = [
        key,
        env.get("LANGFLOW_API_KEY", ""),
        WRONG_KEY,
        os.environ.get("FLOWISE_ADMIN_PASSWORD", "Passw0rd!23"),
    ]
    rec = Recorder("flowise", env["FLOWISE_URL"], {"Authorization": f"Bearer {key}"}, secrets)

    # Leftovers from an interrupted run would change the list and pagination fixtures.
    for flow in rec.list_flows("/api/v1/chatflows"):
        if flow.get("name") == SCRATCH:
            rec.send("DELETE", f"/api/v1/chatflows/{flow['id']}")

    rec.capture("ping", "GET", "/api/v1/ping", auth={})
    rec.capture("chatflows_page1", "GET", "/api/v1/chatflows?page=1&limit=1")
    rec.capture("chatflows_page2", "GET", "/api/v1/chatflows?page=2&limit=1")
    rec.capture("chatflows_list", "GET", "/api/v1/chatflows")
    rec.capture("chatflow_get", "GET", f"/api/v1/chatflows/{agentflow}")
    rec.capture("chatflow_get_unknown", "GET", f"/api/v1/chatflows/{UNKNOWN_UUID}")
    rec.capture("chatflow_get_invalid_id", "GET", "/api/v1/chatflows/not-a-uuid")
    rec.capture("chatflow_delete_unknown", "DELETE", f"/api/v1/chatflows/{UNKNOWN_UUID}")

    ask = {"question": "hello flowise", "overrideConfig": {"sessionId": "fixture-session"}}
    rec.capture("prediction_agentflow", "POST", f"/api/v1/prediction/{agentflow}", ask)
    rec.capture("prediction_chatflow", "POST", f"/api/v1/prediction/{chatflow}", ask)
    rec.capture(
        "prediction_agentflow_stream",
        "POST",
        f"/api/v1/prediction/{agentflow}",
        {**ask, "streaming": True},
    )

    rec.capture(
        "chatflow_create_bad_type",
        "POST",
        "/api/v1/chatflows",
        {"name": SCRATCH, "type": "BOGUS", "flowData": "{}"},
    )
    rec.capture(
        "chatflow_create_bad_flowdata",
        "POST",
        "/api/v1/chatflows",
        {"name": SCRATCH, "type": "CHATFLOW", "flowData": "not json"},
    )
    flow_data = json.dumps(json.loads((FLOWS_DIR / "flowise-echo-chatflow.json").read_text()))
    created = rec.capture(
        "chatflow_create",
        "POST",
        "/api/v1/chatflows",
        {"name": SCRATCH, "type": "CHATFLOW", "flowData": flow_data},
    )
    scratch_id = created.get("id") if isinstance(created, dict) else None
    if scratch_id:
        try:
            rec.capture("chatflow_delete", "DELETE", f"/api/v1/chatflows/{scratch_id}")
        finally:
            rec.send(
                "DELETE", f"/api/v1/chatflows/{scratch_id}"
            )  # make sure it is gone whatever happened

    rec.capture(
        "generator_no_llm",
        "POST",
        "/api/v1/agentflowv2-generator/generate",
        {"question": "x", "selectedChatModel": {"name": "noSuchModel"}},
    )
    rec.capture("unknown_route", "GET", "/api/v1/nonexistent-route")
    rec.capture(
        "wrong_api_key", "GET", "/api/v1/chatflows", auth={"Authorization": f"Bearer {WRONG_KEY}"}
    )
    log(f"flowise: {rec.count} fixtures in {rec.dir.relative_to(ROOT)}")


def capture_langflow(env: dict[str, str]) -> None:
    key = env["LANGFLOW_API_KEY"]
    echo, prompt = env["LANGFLOW_ECHO_FLOW_ID"], env["LANGFLOW_PROMPT_FLOW_ID"]
    secrets = [
        key,
        env.get("FLOWISE_API_KEY", ""),
        WRONG_KEY,
        os.environ.get("LANGFLOW_SUPERUSER_PASSWORD", "admin-pass-123"),
    ]
    rec = Recorder("langflow", env["LANGFLOW_URL"], {"x-api-key": key}, secrets)

    for flow in rec.list_flows("/api/v1/flows/?get_all=true&header_flows=true"):
        if flow.get("endpoint_name", "").startswith(SCRATCH) or flow.get("name", "").startswith(
            SCRATCH
        ):
            rec.send("DELETE", f"/api/v1/flows/{flow['id']}")

    rec.capture("health_check", "GET", "/health_check", auth={})
    rec.capture(
        "flows_page1", "GET", "/api/v1/flows/?get_all=false&header_flows=false&page=1&size=1"
    )
    rec.capture(
        "flows_page2", "GET", "/api/v1/flows/?get_all=false&header_flows=false&page=2&size=1"
    )
    # A page with data holding a model component (the fake LLM flow the live tests run):
    # discovery reads where temperature and max_tokens reach a flow from it.
    llm = json.loads((ROOT / "tests/peers/langflow-fake-llm-flow.json").read_text())
    llm_flow = rec.send(
        "POST", "/api/v1/flows/", {**llm, "name": SCRATCH, "endpoint_name": SCRATCH}
    )
    try:
        rec.capture(
            "flows_page_all",
            "GET",
            "/api/v1/flows/?get_all=false&header_flows=false&page=1&size=100",
        )
    finally:
        rec.send("DELETE", f"/api/v1/flows/{llm_flow.json().get('id')}")
    rec.capture("flow_get", "GET", f"/api/v1/flows/{echo}")
    rec.capture("flow_get_unknown", "GET", f"/api/v1/flows/{UNKNOWN_UUID}")
    rec.capture("flow_get_invalid_id", "GET", "/api/v1/flows/not-a-uuid")

    run = {
        "input_value": "hello langflow",
        "input_type": "chat",
        "output_type": "chat",
        "session_id": "fixture-session",
    }
    failing = {**run, "tweaks": {"Prompt-echo1": {"template": "bad {"}}}
    rec.capture("run_echo", "POST", f"/api/v1/run/{echo}", run)
    rec.capture("run_echo_prompt", "POST", f"/api/v1/run/{prompt}", run)
    rec.capture("run_stream", "POST", f"/api/v1/run/{echo}?stream=true", run)
    rec.capture("run_error", "POST", f"/api/v1/run/{prompt}", failing)
    rec.capture("run_error_stream", "POST", f"/api/v1/run/{prompt}?stream=true", failing)
    rec.capture("run_unknown_flow", "POST", f"/api/v1/run/{UNKNOWN_UUID}", run)
    rec.capture("run_no_key", "POST", f"/api/v1/run/{echo}", run, auth={})
    rec.capture("run_bad_key", "POST", f"/api/v1/run/{echo}", run, auth={"x-api-key": WRONG_KEY})
    rec.capture("flows_no_key", "GET", "/api/v1/flows/?get_all=false&page=1&size=1", auth={})
    rec.capture(
        "flows_bad_key",
        "GET",
        "/api/v1/flows/?get_all=false&page=1&size=1",
        auth={"x-api-key": WRONG_KEY},
    )

    scratch = {
        "name": SCRATCH,
        "description": "scratch flow made by capture_fixtures.py",
        "data": {"nodes": [], "edges": [], "viewport": {"x": 0, "y": 0, "zoom": 1}},
        "endpoint_name": SCRATCH,
    }
    created = rec.capture("flow_create", "POST", "/api/v1/flows/", scratch)
    scratch_id = created.get("id") if isinstance(created, dict) else None
    if scratch_id:
        try:
            rec.capture(
                "flow_patch",
                "PATCH",
                f"/api/v1/flows/{scratch_id}",
                {"description": "patched by capture_fixtures.py"},
            )
            rec.capture("flow_delete", "DELETE", f"/api/v1/flows/{scratch_id}")
        finally:
            rec.send("DELETE", f"/api/v1/flows/{scratch_id}")
    log(f"langflow: {rec.count} fixtures in {rec.dir.relative_to(ROOT)}")


def main(argv: list[str]) -> int:
    which = argv[1] if len(argv) > 1 else "all"
    if which not in ("all", "flowise", "langflow") or len(argv) > 2:
        print(f"usage: {argv[0]} [all|flowise|langflow]", file=sys.stderr)
        return 2
    env = read_env()
    try:
        if which in ("all", "flowise"):
            capture_flowise(env)
        if which in ("all", "langflow"):
            capture_langflow(env)
    except KeyError as exc:
        print(
            f"error: {exc} missing from {ENV_FILE.relative_to(ROOT)}; run scripts/peers/seed.py",
            file=sys.stderr,
        )
        return 1
    except httpx.TransportError as exc:
        print(f"error: {exc}; are the peers running? (scripts/peers/start.sh)", file=sys.stderr)
        return 1
    except httpx.HTTPError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

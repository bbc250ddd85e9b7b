"""Seed the live Flowise and Langflow peers started by scripts/peers/start.sh.

Idempotent: creates the admin account (Flowise) and an API key on each server,
and the LLM-free echo flows from tests/peers/*.json, only when they do not
exist yet; a stored key that still works is reused (kept in
<peers dir>/<name>/data/flywheel-apikey.txt, mode 0600). Then runs each flow
once as a smoke test and writes var/peers.env (KEY=VALUE, shell-sourceable):
FLOWISE_URL, FLOWISE_API_KEY, FLOWISE_AGENTFLOW_ID, FLOWISE_CHATFLOW_ID,
LANGFLOW_URL, LANGFLOW_API_KEY, LANGFLOW_ECHO_FLOW_ID, LANGFLOW_PROMPT_FLOW_ID.

    .venv/bin/python scripts/peers/seed.py [all|flowise|langflow]

Seeding one server keeps the other's lines in var/peers.env. Progress goes to
stderr; keys and passwords are never printed. Standard library + httpx only.

Env: FLYWHEEL_PEERS_DIR, FLOWISE_PORT (3100), LANGFLOW_PORT (7860),
FLOWISE_ADMIN_EMAIL / FLOWISE_ADMIN_PASSWORD (admin@example.com / Passw0rd!23),
LANGFLOW_SUPERUSER / LANGFLOW_SUPERUSER_PASSWORD (admin / admin-pass-123, as in start.sh).
"""

from __future__ import annotations

import json
import os
import shlex
import sys
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[2]
PEERS_DIR = Path(os.environ.get("FLYWHEEL_PEERS_DIR") or Path.home() / ".cache/flywheel/peers")
FLOWS_DIR = ROOT / "tests/peers"
ENV_FILE = ROOT / "var/peers.env"
KEY_NAME = "flywheel-peer"
SMOKE_QUESTION = "flywheel seed smoke test"
TIMEOUT = httpx.Timeout(30.0, connect=5.0)

# Every workspace permission an API key can hold in Flowise 3.1.4
# (dist/enterprise/rbac/Permissions.js minus workspace/admin/loginActivity).
_FLOWISE_PERMISSIONS = {
    "chatflows": "view create update duplicate delete export import config domains",
    "agentflows": "view create update duplicate delete export import config domains",
    "tools": "view create update delete export",
    "assistants": "view create update delete",
    "credentials": "view create update delete share",
    "variables": "view create update delete",
    "apikeys": "view create update delete",
    "documentStores": "view create update delete add-loader delete-loader preview-process "
    "upsert-config",
    "datasets": "view create update delete",
    "executions": "view update delete",
    "evaluators": "view create update delete",
    "evaluations": "view create update delete run",
    "templates": "marketplace custom custom-delete toolexport flowexport custom-share",
    "logs": "view",
}
FLOWISE_PERMISSIONS = [f"{c}:{p}" for c, ps in _FLOWISE_PERMISSIONS.items() for p in ps.split()]

# Lets the agentflow's Direct Reply text be overridden per request (FLOWISE.md §4, §5.2).
FLOWISE_AGENTFLOW_API_CONFIG = {
    "overrideConfig": {
        "status": True,
        "nodes": {"Echo Reply": [{"name": "directReplyMessage", "enabled": True}]},
        "variables": [],
    }
}


class SeedError(Exception):
    pass


def log(message: str) -> None:
    print(f"[seed] {message}", file=sys.stderr, flush=True)


def check(response: httpx.Response, what: str, *expected: int) -> httpx.Response:
    """The response if its status is one of `expected` (default 200), else SeedError."""
    if response.status_code not in (expected or (200,)):
        raise SeedError(f"{what}: HTTP {response.status_code} {response.text[:300]}")
    return response


def ok(response: httpx.Response) -> bool:
    return response.status_code == 200


def read_key(path: Path) -> str | None:
    try:
        return path.read_text().strip() or None
    except FileNotFoundError:
        return None


def write_key(path: Path, key: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.touch(mode=0o600, exist_ok=True)
    path.write_text(key + "\n")


def wait_for(client: httpx.Client, name: str, path: str) -> None:
    try:
        client.get(path, timeout=5)
    except httpx.TransportError as exc:
        hint = f"start it with scripts/peers/start.sh {name.lower()}"
        raise SeedError(f"{name} does not answer at {client.base_url} ({exc}); {hint}") from exc


# --- Flowise -------------------------------------------------------------------------------------


def flowise_api_key(client: httpx.Client, key_file: Path) -> str:
    """A working key: the stored one if it still works, else ours from the server, else a new."""
    stored = read_key(key_file)
    bearer = {"Authorization": f"Bearer {stored}"}
    if stored and ok(client.get("/api/v1/chatflows", headers=bearer)):
        log("Flowise: stored API key still works")
        return stored

    email = os.environ.get("FLOWISE_ADMIN_EMAIL", "admin@example.com")
    password = os.environ.get("FLOWISE_ADMIN_PASSWORD", "Passw0rd!23")
    r = client.post(
        "/api/v1/account/register",
        json={"user": {"name": "Admin", "email": email, "credential": password}},
    )
    if r.status_code == 201:
        log(f"Flowise: registered admin {email}")
    elif r.status_code == 400 and "only have one organization" in r.text:
        log("Flowise: admin already registered")
    else:
        check(r, "Flowise register")

    r = check(
        client.post("/api/v1/auth/login", json={"email": email, "password": password}),
        "Flowise login",
    )
    # Cookie-authenticated API calls must say they come from the UI, or the server wants an API key.
    internal = {
        "x-request-from": "internal",
        "Cookie": "; ".join(f"{k}={v}" for k, v in r.cookies.items()),
    }

    keys = check(client.get("/api/v1/apikey", headers=internal), "Flowise list API keys").json()
    mine = [k for k in keys if k.get("keyName") == KEY_NAME]
    if mine:
        log(f"Flowise: reusing API key {KEY_NAME!r} found on the server")
    else:
        body = {"keyName": KEY_NAME, "permissions": FLOWISE_PERMISSIONS}
        keys = check(
            client.post("/api/v1/apikey", json=body, headers=internal), "Flowise create API key"
        ).json()
        mine = [k for k in keys if k.get("keyName") == KEY_NAME]
        if not mine:
            raise SeedError(f"Flowise create API key: no key named {KEY_NAME!r} in the response")
        log(f"Flowise: created API key {KEY_NAME!r}")
    key = mine[0]["apiKey"]
    write_key(key_file, key)
    return key


def flowise_flow(
    client: httpx.Client, flows: list[dict[str, Any]], name: str, flow_type: str, file: str
) -> str:
    existing = [f for f in flows if f.get("name") == name]
    if existing:
        log(f"Flowise: flow {name!r} exists ({existing[0]['id']})")
        return str(existing[0]["id"])
    flow_data = json.loads((FLOWS_DIR / file).read_text())
    body: dict[str, Any] = {
        "name": name,
        "type": flow_type,
        "deployed": True,
        "flowData": json.dumps(flow_data),
    }
    if flow_type == "AGENTFLOW":
        body["apiConfig"] = json.dumps(FLOWISE_AGENTFLOW_API_CONFIG)
    created = check(
        client.post("/api/v1/chatflows", json=body), f"Flowise create flow {name!r}"
    ).json()
    log(f"Flowise: created {flow_type} {name!r} ({created['id']})")
    return str(created["id"])


def seed_flowise() -> dict[str, str]:
    url = f"http://127.0.0.1:{os.environ.get('FLOWISE_PORT', '3100')}"
    key_file = PEERS_DIR / "flowise/data/flywheel-apikey.txt"
    with httpx.Client(base_url=url, timeout=TIMEOUT) as client:
        wait_for(client, "Flowise", "/api/v1/ping")
        key = flowise_api_key(client, key_file)
        client.headers["Authorization"] = f"Bearer {key}"
        flows = check(client.get("/api/v1/chatflows"), "Flowise list flows").json()
        agentflow = flowise_flow(
            client, flows, "echo-agentflow", "AGENTFLOW", "flowise-echo-agentflow.json"
        )
        chatflow = flowise_flow(
            client, flows, "echo-chatflow", "CHATFLOW", "flowise-echo-chatflow.json"
        )
        for name, flow_id in (("echo-agentflow", agentflow), ("echo-chatflow", chatflow)):
            r = check(
                client.post(f"/api/v1/prediction/{flow_id}", json={"question": SMOKE_QUESTION}),
                f"Flowise run {name}",
            )
            text = r.json().get("text")
            if text != f"Echo: {SMOKE_QUESTION}":
                raise SeedError(f"Flowise run {name}: unexpected answer {text!r}")
            log(f"Flowise: {name} answers {text!r}")
    return {
        "FLOWISE_URL": url,
        "FLOWISE_API_KEY": key,
        "FLOWISE_AGENTFLOW_ID": agentflow,
        "FLOWISE_CHATFLOW_ID": chatflow,
    }


# --- Langflow ------------------------------------------------------------------------------------


def langflow_api_key(client: httpx.Client, key_file: Path) -> str:
    stored = read_key(key_file)
    if stored and ok(client.get("/api/v1/users/whoami", headers={"x-api-key": stored})):
        log("Langflow: stored API key still works")
        return stored
    # Full keys are shown only once, at creation; a lost key cannot be recovered, so make a new one.
    username = os.environ.get("LANGFLOW_SUPERUSER", "admin")
    password = os.environ.get("LANGFLOW_SUPERUSER_PASSWORD", "admin-pass-123")
    r = check(
        client.post("/api/v1/login", data={"username": username, "password": password}),
        "Langflow login",
    )
    jwt = {"Authorization": f"Bearer {r.json()['access_token']}"}
    # Keys of ours whose value we lost are useless: remove them rather than pile up.
    listed = check(client.get("/api/v1/api_key/", headers=jwt), "Langflow list API keys").json()
    for old in listed.get("api_keys", []):
        if old.get("name") == KEY_NAME:
            check(
                client.delete(f"/api/v1/api_key/{old['id']}", headers=jwt),
                "Langflow delete stale API key",
            )
            log(f"Langflow: deleted stale API key {KEY_NAME!r} ({old['id']})")
    created = check(
        client.post("/api/v1/api_key/", json={"name": KEY_NAME}, headers=jwt),
        "Langflow create API key",
    ).json()
    log(f"Langflow: created API key {KEY_NAME!r}")
    key = str(created["api_key"])
    write_key(key_file, key)
    return key


def langflow_flow(
    client: httpx.Client, flows: list[dict[str, Any]], endpoint: str, file: str
) -> str:
    existing = [f for f in flows if f.get("endpoint_name") == endpoint]
    if existing:
        log(f"Langflow: flow {endpoint!r} exists ({existing[0]['id']})")
        return str(existing[0]["id"])
    spec = json.loads((FLOWS_DIR / file).read_text())
    body = {
        "name": endpoint,
        "description": spec.get("description", ""),
        "data": spec["data"],
        "endpoint_name": endpoint,
    }
    created = check(
        client.post("/api/v1/flows/", json=body), f"Langflow create flow {endpoint!r}", 201
    ).json()
    # A taken name or endpoint_name is silently renamed (LANGFLOW.md §6.5).
    if created.get("endpoint_name") != endpoint:
        renamed = created.get("endpoint_name")
        raise SeedError(f"Langflow create flow {endpoint!r}: the server renamed it to {renamed!r}")
    log(f"Langflow: created flow {endpoint!r} ({created['id']})")
    return str(created["id"])


def langflow_answer(response: httpx.Response) -> Any:
    try:
        return response.json()["outputs"][0]["outputs"][0]["results"]["message"]["text"]
    except (ValueError, KeyError, IndexError, TypeError):
        return None


def seed_langflow() -> dict[str, str]:
    url = f"http://127.0.0.1:{os.environ.get('LANGFLOW_PORT', '7860')}"
    key_file = PEERS_DIR / "langflow/data/flywheel-apikey.txt"
    with httpx.Client(base_url=url, timeout=TIMEOUT) as client:
        wait_for(client, "Langflow", "/health_check")
        key = langflow_api_key(client, key_file)
        client.headers["x-api-key"] = key
        flows = check(
            client.get("/api/v1/flows/", params={"get_all": "true", "header_flows": "true"}),
            "Langflow list flows",
        ).json()
        echo = langflow_flow(client, flows, "echo", "langflow-echo-flow.json")
        prompt = langflow_flow(client, flows, "echo-prompt", "langflow-echo-prompt-flow.json")
        for name, flow_id, expected in (
            ("echo", echo, SMOKE_QUESTION),
            ("echo-prompt", prompt, f"Echo: {SMOKE_QUESTION}"),
        ):
            body = {
                "input_value": SMOKE_QUESTION,
                "input_type": "chat",
                "output_type": "chat",
                "session_id": "flywheel-seed",
            }
            text = langflow_answer(
                check(client.post(f"/api/v1/run/{flow_id}", json=body), f"Langflow run {name}")
            )
            if text != expected:
                raise SeedError(f"Langflow run {name}: unexpected answer {text!r}")
            log(f"Langflow: {name} answers {text!r}")
    return {
        "LANGFLOW_URL": url,
        "LANGFLOW_API_KEY": key,
        "LANGFLOW_ECHO_FLOW_ID": echo,
        "LANGFLOW_PROMPT_FLOW_ID": prompt,
    }


# --- var/peers.env -------------------------------------------------------------------------------

ENV_ORDER = [
    "FLOWISE_URL", "FLOWISE_API_KEY", "FLOWISE_AGENTFLOW_ID", "FLOWISE_CHATFLOW_ID",
    "LANGFLOW_URL", "LANGFLOW_API_KEY", "LANGFLOW_ECHO_FLOW_ID", "LANGFLOW_PROMPT_FLOW_ID",
]  # fmt: skip


def read_env() -> dict[str, str]:
    values: dict[str, str] = {}
    if ENV_FILE.exists():
        for line in ENV_FILE.read_text().splitlines():
            if "=" in line and not line.lstrip().startswith("#"):
                key, _, value = line.partition("=")
                parsed = shlex.split(value)
                values[key.strip()] = parsed[0] if parsed else ""
    return values


def write_env(values: dict[str, str]) -> None:
    keys = [k for k in ENV_ORDER if k in values] + sorted(k for k in values if k not in ENV_ORDER)
    text = "# Live peers for Flywheel, written by scripts/peers/seed.py. Contains API keys.\n"
    text += "".join(f"{k}={shlex.quote(values[k])}\n" for k in keys)
    ENV_FILE.parent.mkdir(parents=True, exist_ok=True)
    tmp = ENV_FILE.with_suffix(".env.tmp")
    tmp.touch(mode=0o600, exist_ok=True)
    tmp.write_text(text)
    tmp.replace(ENV_FILE)


def main(argv: list[str]) -> int:
    which = argv[1] if len(argv) > 1 else "all"
    if which not in ("all", "flowise", "langflow") or len(argv) > 2:
        print(f"usage: {argv[0]} [all|flowise|langflow]", file=sys.stderr)
        return 2
    values = read_env()
    try:
        if which in ("all", "flowise"):
            values.update(seed_flowise())
        if which in ("all", "langflow"):
            values.update(seed_langflow())
    except (SeedError, httpx.HTTPError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    write_env(values)
    log(f"wrote {ENV_FILE.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

"""`make fuzz`: schemathesis over the served OpenAPI schema, against a real server.

What it sets up, all its own and all stopped again at the end: a PostgreSQL
database (flywheel_fuzz_<checkout>, recreated), a cache prefix in Redis
(fuzz_<checkout>, its old keys deleted first), a stand-in Flowise on a
free port that really answers (ping, the chatflows' list and CRUD, the
AgentFlow V2 generator, predictions, streamed ones too), registered as a
shared backend the way an administrator would (`add_backend`,
`discover_flows`, `check_health`), an API key of the default tenant, and
Flywheel itself under uvicorn on a free port, with a generator model
configured (FLOWISE_GENERATOR_MODEL, which the stand-in accepts). Then
`schemathesis run` sends generated requests to every operation of
/api/v1/schema with that key. Exit status: schemathesis's (non-zero when a
check failed).

Bounds: at most MAX_EXAMPLES generated cases per operation and phase, and
MAX_SECONDS for the whole run (schemathesis keeps fuzzing until the budget
is spent, so a run takes about that long plus 30-60 s of set-up). Arguments
are passed on to schemathesis, e.g. `make fuzz ARGS="--seed 1"`.

This file is also the schemathesis hooks file (SCHEMATHESIS_HOOKS): it
registers the check that replaces not_a_server_error, and a before_call
hook that turns schema-valid values naming nothing real into real ones
(see both below).
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import json
import os
import re
import signal
import socket
import subprocess
import sys
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit, urlunsplit

import schemathesis

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run as a script, and loaded by schemathesis as its hooks

from bench.common import free_port, wait_for  # noqa: E402
from bench.standin import read_body  # noqa: E402

STANDIN = "fuzz-standin"
MAX_EXAMPLES = 20
MAX_SECONDS = 150
# Flows the stand-in starts with (ids flow-0, flow-1, ...): one named after each shipped
# intent, so that discovery gives every intent a flow and a generated question can
# always be answered.
FLOWS = (
    "general",
    "code review",
    "technical analysis",
    "document qa",
    "summarize",
    "creative orientation",
)
FLOW_IDS = tuple(f"flow-{i}" for i in range(len(FLOWS)))
# A real flow's flowData (a JSON string, as Flowise takes and gives it), and the nodes
# and edges the stand-in's generator answers with.
PEERS = ROOT / "tests" / "peers"
ECHO_FLOW = json.dumps(json.loads((PEERS / "flowise-echo-chatflow.json").read_text()))
GENERATED = json.loads((PEERS / "flowise-echo-agentflow.json").read_text())

# --- the check -----------------------------------------------------------------------

# Failures that mean the backend could not be reached: it really is down.
DOWN = {"ConnectionError", "TimeoutError", "BackendUnavailable"}


def _failures(response: schemathesis.Response) -> list[tuple[str, str]]:
    """(backend, error type) of every backend failure an error body names."""
    try:
        error = json.loads(response.content)["error"]
        details = error["details"]
    except (ValueError, KeyError, TypeError):
        return []
    named = [(str(details["backend"]), error["type"])] if details.get("backend") else []
    chain = details.get("fallback_chain") or []
    return named + [(str(a.get("backend")), str(a.get("error_type"))) for a in chain]


@schemathesis.check
def no_server_error_unless_a_backend_is_down(
    ctx: schemathesis.CheckContext, response: schemathesis.Response, case: schemathesis.Case
) -> bool | None:
    """not_a_server_error, except 502/503/504 from backends that really are down.

    Every backend the fuzzer registers points at DOWN_ADDRESS (see before_call),
    where nothing listens. A 502/503/504 passes when it names the backends that
    failed, none of them is the stand-in (which is up all run) and each failed
    by not answering or being unavailable; anything else is a failure.
    """
    status = response.status_code
    if status < 500:
        return None
    failures = _failures(response)
    if (
        status in {502, 503, 504}
        and failures
        and all(backend != STANDIN and kind in DOWN for backend, kind in failures)
    ):
        return None
    raise AssertionError(f"Server error {status}: {response.content[:500]!r}")


# --- valid data the schema cannot describe -----------------------------------------

# A value can pass the schema and still name nothing that exists: an intent or a
# backend nobody made, a host that resolves nowhere (there is no DNS here, and a
# tenant's backend must resolve to public addresses). Before a request leaves, such
# values are swapped for real ones; only values the schema accepts are touched, so a
# case generated to be invalid stays invalid. Backend URLs all point at DOWN_ADDRESS,
# where a port is held open without listening: their backends are down, for real.
# (Not summarize: with no answers in the session yet it is refused, a 400.)
INTENTS = ("general", "code-review", "technical-analysis", "document-qa", "creative-orientation")
BACKENDS = ("auto", "flowise", STANDIN)
SLUG = re.compile(r"[-a-z0-9_]{1,50}")
URL = re.compile(r"[Hh][Tt][Tt][Pp][Ss]?://[^/?#@\s]+([/?#]\S*)?")
# As chatflows.lifecycle (not imported: this file is loaded without Django).
FLOW_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,199}")
MAX_BACKEND = 100
CHATFLOWS = "/api/v1/chatflows"
GENERATOR_MODEL = {"name": "chatOpenAI", "inputs": {"modelName": "stand-in"}}
DOWN_ADDRESS = "127.255.255.1"
_names = itertools.count(1)


def _pick(choices: tuple[str, ...], value: str) -> str:
    return choices[len(value) % len(choices)]


def _fit_query(body: dict[str, Any]) -> None:
    intent, backend = body.get("intent"), body.get("backend")
    if isinstance(intent, str) and SLUG.fullmatch(intent) and intent not in INTENTS:
        body["intent"] = _pick(INTENTS, intent)
    if isinstance(backend, str) and 0 < len(backend.strip()) <= 100 and backend not in BACKENDS:
        body["backend"] = _pick(BACKENDS, backend)


def _fit_chat(body: dict[str, Any]) -> None:
    """An OpenAI-style completion: most models become the routed one (the rest stay
    unknown, so model_not_found is tested too); Flywheel's options as a query's."""
    model = body.get("model")
    if isinstance(model, str) and model != "flywheel" and len(model) % 3:
        body["model"] = "flywheel"
    messages = body.get("messages")
    if isinstance(messages, list) and messages:
        # The schema cannot say that the last message must be the user's question.
        last = messages[-1]
        content = last.get("content") if isinstance(last, dict) else None
        if not (
            isinstance(last, dict)
            and last.get("role") == "user"
            and isinstance(content, str)
            and content.strip()
            and len(content.strip()) <= 10_000
        ):
            question = {"role": "user", "content": "What is a flywheel?"}
            if len(messages) < 1000:  # the most the schema allows
                messages.append(question)
            else:
                messages[-1] = question
    if isinstance(body.get("flywheel"), dict):
        _fit_query(body["flywheel"])


def _fit_response(body: dict[str, Any]) -> None:
    """A Responses API request: as a completion's, with ``input`` for the messages (a
    string input is the question itself)."""
    given = body.get("input")
    if isinstance(given, list):
        chat = {"model": body.get("model"), "messages": given}
        _fit_chat(chat)
        body["model"] = chat["model"]
    elif isinstance(body.get("model"), str):
        _fit_chat(body)  # the model alone: messages absent
    if isinstance(body.get("flywheel"), dict):
        _fit_query(body["flywheel"])


def _fit_backend(body: dict[str, Any]) -> None:
    url, name = body.get("base_url"), body.get("name")
    if isinstance(url, str) and len(url) <= 500 and URL.fullmatch(url):
        parts = urlsplit(url)
        down = f"{DOWN_ADDRESS}:{os.environ['FUZZ_DOWN_PORT']}"
        body["base_url"] = urlunsplit(parts._replace(netloc=down))
    if isinstance(name, str) and 0 < len(name.strip()) <= 100:
        # Unique, so that creating a backend succeeds and the stateful phase can use it.
        body["name"] = f"{name.strip()[:90]}-{next(_names)}"


def _is_flow(text: str) -> bool:
    """Whether ``text`` is flowData the lifecycle takes: a JSON object with nodes and edges
    lists (its 1 MB bound is far beyond what the fuzzer sends)."""
    try:
        data = json.loads(text)
    except ValueError:
        return False
    return isinstance(data, dict) and all(isinstance(data.get(k), list) for k in ("nodes", "edges"))


def _fit_chatflow(case: schemathesis.Case) -> None:
    """The flow lifecycle's operations (chatflows/lifecycle.py).

    - ``flow_data``: any non-empty string passes the schema, but only a JSON object
      with nodes and edges lists is a flow (JSON is not a regular language): a
      string that is not one becomes a real flow's.
    - ``{chatflow_id}``: an id of the right form mostly names no flow; two times in
      three it becomes one of the stand-in's (always for ``generate``, which routes to
      the generator instead), the rest stay unknown, so not-found is tested too.
      The stand-in is shared: a tenant's key reads and runs its flows, and writing
      them is refused (403), as it should be.
    - ``?backend=``: a value naming no backend becomes the stand-in's name or is left
      blank (no backend named). A create always names the stand-in (403, a shared
      backend): without one, a new flow goes to the key's only backend, and the
      fuzzer's key has none or several of its own (400, "name the backend").
    """
    path = case.operation.path
    if isinstance(case.body, dict):
        flow_data = case.body.get("flow_data")
        if isinstance(flow_data, str) and flow_data and not _is_flow(flow_data):
            case.body["flow_data"] = ECHO_FLOW
    flow_id = (case.path_parameters or {}).get("chatflow_id")
    if (
        isinstance(flow_id, str)
        and FLOW_ID.fullmatch(flow_id)
        and flow_id not in FLOW_IDS
        and (flow_id == "generate" or len(flow_id) % 3)
    ):
        case.path_parameters["chatflow_id"] = _pick(FLOW_IDS, flow_id)
    create = path == CHATFLOWS and case.method.upper() == "POST"
    if create and case.query is None:
        case.query = {}
    if not isinstance(case.query, dict):
        return
    backend = case.query.get("backend")
    if backend == STANDIN or not (
        backend is None or (isinstance(backend, str) and len(backend) <= MAX_BACKEND)
    ):
        return
    if create:
        case.query["backend"] = STANDIN
    elif backend is not None and backend.strip():
        case.query["backend"] = STANDIN if len(backend) % 2 else ""


def _moment(value: Any) -> datetime | None:
    try:
        moment = datetime.fromisoformat(str(value))
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _fit_range(case: schemathesis.Case) -> None:
    """A range the schema cannot refuse (since after until, or over 90 days) becomes the
    day before until: the two dates are each valid, only together they are not."""
    query = case.query if isinstance(case.query, dict) else None
    if not query or "since" not in query:
        return
    start, end = _moment(query["since"]), _moment(query.get("until") or datetime.now(UTC))
    if start is None or end is None:
        return  # not a date: the server refuses it, as the schema does
    if start >= end or end - start > timedelta(days=90):
        try:
            query["since"] = (end - timedelta(days=1)).isoformat()
        except OverflowError:  # until is the first day datetime holds
            del query["since"]


@schemathesis.hook
def before_call(
    context: schemathesis.HookContext, case: schemathesis.Case, kwargs: dict[str, Any]
) -> None:
    path = case.operation.path
    if path == CHATFLOWS or path.startswith(f"{CHATFLOWS}/"):
        _fit_chatflow(case)
    if path.startswith("/api/v1/analytics/"):
        _fit_range(case)
    if path.startswith("/compat/"):
        flow = (case.path_parameters or {}).get("flow")
        # A flow the schema allows (a case meant to be refused keeps its bad one).
        if (
            isinstance(flow, str)
            and 0 < len(flow) <= 200
            and flow not in FLOW_IDS
            and len(flow) % 3
        ):
            case.path_parameters["flow"] = _pick(FLOW_IDS, flow)  # the rest stay unknown
    if not isinstance(case.body, dict):
        return
    if path in {"/api/v1/query", "/api/v1/route"}:
        _fit_query(case.body)
    elif path == "/v1/chat/completions":
        _fit_chat(case.body)
    elif path == "/v1/responses":
        _fit_response(case.body)
    elif path.startswith("/api/v1/backends"):
        _fit_backend(case.body)


# --- the stand-in Flowise ------------------------------------------------------------

# Answers as Flowise 3.1.4 does (../shared/peers/FLOWISE.md, tests/fixtures/flowise):
# records with flowData as a JSON string, 200 for a create, a partial merge for an
# update, "not found in the database" (404, or 500 for a delete) for unknown ids, and
# errors as {statusCode, success, message, stack}. Flows live in memory, for the run.
TYPES = ("CHATFLOW", "AGENTFLOW", "MULTIAGENT", "ASSISTANT")
WORKSPACE = "00000000-0000-4000-8000-000000000000"
_flows: dict[str, dict[str, Any]] = {}


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _record(flow_id: str, name: Any, flow_data: Any, flow_type: Any, deployed: Any) -> dict:
    now = _now()
    return {
        "id": flow_id,
        "name": name,
        "flowData": flow_data,
        "deployed": deployed,
        "isPublic": None,
        "apikeyid": None,
        "chatbotConfig": None,
        "apiConfig": None,
        "analytic": None,
        "speechToText": None,
        "textToSpeech": None,
        "followUpPrompts": None,
        "category": None,
        "type": flow_type,
        "createdDate": now,
        "updatedDate": now,
        "mcpServerConfig": None,
        "webhookSecretConfigured": False,
        "workspaceId": WORKSPACE,
    }


def _seed() -> None:
    for flow_id, name in zip(FLOW_IDS, FLOWS, strict=True):
        _flows[flow_id] = _record(flow_id, name, ECHO_FLOW, "CHATFLOW", True)


class Refused(Exception):
    """A Flowise error answer."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status, self.message = status, message


def _not_found(flow_id: str, where: str = "") -> Refused:
    status = 500 if where else 404
    return Refused(status, f"{where}Chatflow {flow_id} not found in the database!")


def _checked_flow_data(value: Any) -> None:
    """Flowise parses flowData with JSON.parse: anything else is a 500 saying so."""
    text = value if isinstance(value, str) else "[object Object]" if value else "undefined"
    try:
        json.loads(text)
    except ValueError:
        raise Refused(500, f'"{text[:40]}" is not valid JSON') from None


def _create(body: dict[str, Any]) -> dict[str, Any]:
    if body.get("type") not in TYPES:
        raise Refused(400, "Invalid Chatflow Type")
    _checked_flow_data(body.get("flowData"))
    if not isinstance(body.get("name"), str):
        raise Refused(500, "SQLITE_CONSTRAINT: NOT NULL constraint failed: chat_flow.name")
    flow_id = str(uuid.uuid4())
    record = _record(flow_id, body["name"], body["flowData"], body["type"], body.get("deployed"))
    _flows[flow_id] = record
    return {**record, "webhookSecret": None}


def _update(flow_id: str, body: dict[str, Any]) -> dict[str, Any]:
    if flow_id not in _flows:
        raise _not_found(flow_id)
    if "flowData" in body:
        _checked_flow_data(body["flowData"])
    fields = {k: v for k, v in body.items() if k not in {"id", "workspaceId", "createdDate"}}
    _flows[flow_id].update(fields, updatedDate=_now())
    return {**_flows[flow_id], "webhookSecret": None}


def _generate(body: dict[str, Any]) -> dict[str, Any]:
    if not body.get("question") or not body.get("selectedChatModel"):
        raise Refused(500, "Question and selectedChatModel are required")
    return {"nodes": GENERATED["nodes"], "edges": GENERATED["edges"]}


def _listed(query: dict[str, list[str]]) -> Any:
    """A bare array, or {data, total} when both page and limit are positive."""
    kind = (query.get("type") or [""])[0]
    records = [r for r in _flows.values() if kind not in TYPES or r["type"] == kind]
    records.sort(key=lambda r: r["updatedDate"], reverse=True)
    try:
        page, limit = int(query["page"][0]), int(query["limit"][0])
    except (KeyError, ValueError):
        page = limit = 0
    if page > 0 and limit > 0:
        return {"data": records[(page - 1) * limit : page * limit], "total": len(records)}
    return records


def _prediction(flow_id: str, request: dict[str, Any]) -> tuple[str, bytes]:
    if flow_id not in _flows:
        raise _not_found(flow_id)
    text = f"Echo: {request.get('question', '')}"
    session = str((request.get("overrideConfig") or {}).get("sessionId") or "s")
    if not request.get("streaming"):
        return "application/json", json.dumps({"text": text, "sessionId": session}).encode()
    events: list[dict[str, Any]] = [
        {"event": "token", "data": text[i : i + 8]} for i in range(0, len(text), 8)
    ]
    events += [{"event": "metadata", "data": {"sessionId": session}}, {"event": "end"}]
    stream = "".join(f"message:\ndata:{json.dumps(event)}\n\n" for event in events)
    return "text/event-stream", stream.encode()


def _answer(method: str, path: str, query: dict[str, list[str]], body: Any) -> Any:
    """The JSON answer to one API call; raises Refused for Flowise's errors."""
    one = re.fullmatch(r"/api/v1/chatflows/([^/]+)", path)
    if path == "/api/v1/chatflows" and method == "GET":
        return _listed(query)
    if path == "/api/v1/chatflows" and method == "POST":
        return _create(body)
    if one and method == "GET":
        if one[1] not in _flows:
            raise _not_found(one[1])
        return _flows[one[1]]
    if one and method == "PUT":
        return _update(one[1], body)
    if one and method == "DELETE":
        if _flows.pop(one[1], None) is None:
            raise _not_found(one[1], "Error: chatflowsService.deleteChatflow - ")
        return {"raw": [], "affected": 1}
    if path == "/api/v1/agentflowv2-generator/generate" and method == "POST":
        return _generate(body)
    raise Refused(404, "Not found")


async def _reply(send: Any, status: int, content_type: str, body: bytes) -> None:
    headers = [(b"content-type", content_type.encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def standin(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """Flowise's ping, chatflow CRUD, generator and prediction API, answered at once."""
    if scope["type"] != "http":
        return
    raw = await read_body(receive)
    path, method = scope["path"], scope["method"]
    query = parse_qs(scope.get("query_string", b"").decode())
    try:
        body = json.loads(raw) if raw else {}
        if raw and not isinstance(body, dict):
            raise Refused(400, "The request body must be a JSON object")
        if path == "/api/v1/ping":
            await _reply(send, 200, "text/html", b"pong")
        elif path.startswith("/api/v1/prediction/") and method == "POST":
            await _reply(send, 200, *_prediction(path.rsplit("/", 1)[1], body))
        else:
            answer = _answer(method, path, query, body)
            await _reply(send, 200, "application/json", json.dumps(answer).encode())
    except ValueError as err:  # a body that is not JSON
        await _error(send, Refused(400, str(err)))
    except Refused as refused:
        await _error(send, refused)


async def _error(send: Any, refused: Refused) -> None:
    shown = {"statusCode": refused.status, "success": False, "message": refused.message}
    body = json.dumps({**shown, "stack": {}}).encode()
    await _reply(send, refused.status, "application/json", body)


# --- set-up and run ------------------------------------------------------------------


def _checkout() -> str:
    return hashlib.sha1(str(ROOT).encode()).hexdigest()[:8]  # noqa: S324 - a name, not a secret


def environment() -> dict[str, str]:
    """Flywheel's settings for the fuzz run: its own database, cache prefix and files."""
    redis = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379")
    # The PostgreSQL server of DATABASE_URL (as scripts/test.sh), a database of our own.
    server = os.environ.get("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/x")
    database = f"{server.rsplit('/', 1)[0]}/flywheel_fuzz_{_checkout()}"
    return {
        **os.environ,
        "DATABASE_URL": os.environ.get("FUZZ_DATABASE_URL", database),
        "REDIS_URL": redis,
        "CACHE_URL": f"{redis}/1",
        "CELERY_BROKER_URL": f"{redis}/2",
        "FLYWHEEL_CACHE_PREFIX": os.environ.get("FUZZ_CACHE_PREFIX", f"fuzz_{_checkout()}"),
        "FLYWHEEL_VAR_DIR": str(ROOT / "var" / "fuzz"),
        "FLYWHEEL_LOG_LEVEL": "WARNING",
        "DJANGO_DEBUG": "false",
        "DJANGO_ALLOWED_HOSTS": "127.0.0.1,localhost",
        "FLYWHEEL_PUBLIC_URL": "",
        # Where the fuzzer's own backends point (see before_call): down, by design.
        "FLYWHEEL_BACKEND_ALLOWED_NETWORKS": f"{DOWN_ADDRESS}/32",
        # ...so probing each one it registers would only wait for a down address.
        "FLYWHEEL_ONBOARD_NEW_BACKENDS": "false",
        # The checks of authentication send many requests without a key, from one address.
        "FLYWHEEL_AUTH_FAILURE_LIMIT": "100000/minute",
        # Rules only: no question leaves the machine for an LLM.
        "LLM_BASE_URL": "",
        "QUERY_ROUTING_ENABLED": "true",
        "QUERY_ROUTING_USE_LLM": "false",
        # The chat model generate sends: the stand-in's generator takes any.
        "FLOWISE_GENERATOR_MODEL": json.dumps(GENERATOR_MODEL),
    }


def manage(env: dict[str, str], *args: str) -> str:
    result = subprocess.run(  # noqa: S603 - our own interpreter and manage.py
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    if result.returncode != 0:
        raise RuntimeError(f"manage.py {' '.join(args)} failed:\n{result.stderr[-2000:]}")
    return result.stdout.strip()


def recreate_database(url: str) -> None:
    import psycopg

    admin, name = url.rsplit("/", 1)
    with psycopg.connect(f"{admin}/postgres", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')


# Deletes only this run's prefix: the Redis is shared (never FLUSHDB).
FORGET_CACHE = """
from django.core.cache import cache
client = cache._cache.get_client(write=True)
keys = list(client.scan_iter(match=cache.make_key("*"), count=1000))
if keys:
    client.delete(*keys)
"""

# The limiter stays on (its code is fuzzed too), with room for everything one fuzzer sends.
KEY_LIMIT = """
from flywheel.models import ApiKey
ApiKey.objects.filter(name="fuzz").update(rate_limit="100000/minute")
"""


@contextlib.contextmanager
def running(args: list[str], env: dict[str, str], log: Path) -> Iterator[None]:
    """A child process for the duration of the block; terminated (then killed) after."""
    with log.open("wb") as out:
        process = subprocess.Popen(  # noqa: S603 - our own interpreter and modules
            [sys.executable, *args], cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT
        )
        try:
            yield
        finally:
            process.terminate()
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def prepare(env: dict[str, str], standin_port: int) -> str:
    """Database, defaults, the stand-in as a shared backend with its flows; returns a key."""
    subprocess.run([sys.executable, "scripts/ensure_services.py"], cwd=ROOT, env=env, check=True)
    recreate_database(env["DATABASE_URL"])
    manage(env, "shell", "-c", FORGET_CACHE)
    manage(env, "migrate", "--noinput", "-v", "0")
    manage(env, "load_defaults")
    url = f"http://127.0.0.1:{standin_port}"
    manage(env, "add_backend", "--name", STANDIN, "--kind", "flowise", "--url", url)
    manage(env, "discover_flows", "--backend", STANDIN)
    manage(env, "check_health", "--backend", STANDIN)
    key = manage(env, "create_api_key", "--name", "fuzz").splitlines()[-1]
    manage(env, "shell", "-c", KEY_LIMIT)
    return key


def schemathesis_command(port: int, key: str, extra: list[str]) -> list[str]:
    return [
        str(Path(sys.executable).parent / "schemathesis"),
        "run",
        f"http://127.0.0.1:{port}/api/v1/schema?format=json",
        "--header",
        f"Authorization: Bearer {key}",
        # Every check but two: not_a_server_error is replaced by the check above
        # (a backend the fuzzer registered is down by design), and
        # object_level_authorization needs a second tenant's credentials to compare.
        "--checks",
        "all",
        "--exclude-checks",
        "not_a_server_error,object_level_authorization",
        "--max-examples",
        str(MAX_EXAMPLES),
        "--max-time",
        str(MAX_SECONDS),
        "--request-timeout",
        "30",
        # Flywheel refuses NUL characters and lone surrogates in JSON on purpose
        # (PostgreSQL cannot store them): valid data holds neither.
        "--generation-allow-x00",
        "false",
        "--generation-codec",
        "utf-8",
        "--generation-database",
        "none",
        "--no-color",
        *extra,
    ]


def main(extra: list[str]) -> int:
    # SIGTERM (CI cancelling the job) unwinds like Ctrl-C, so every child is stopped.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    env = environment()
    logs = ROOT / "var" / "fuzz"
    logs.mkdir(parents=True, exist_ok=True)
    standin_port, port = free_port(), free_port()
    standin_args = ["scripts/fuzz.py", "standin", str(standin_port)]
    server = ["-m", "uvicorn", "flywheel.asgi:application", "--port", str(port)]
    server += ["--lifespan", "on", "--log-level", "warning"]
    # Bound and never listening: a connection to it is refused at once.
    with socket.socket() as down, running(standin_args, env, logs / "standin.log"):
        down.bind((DOWN_ADDRESS, 0))
        wait_for(f"http://127.0.0.1:{standin_port}/api/v1/ping")
        key = prepare(env, standin_port)
        with running(server, env, logs / "server.log"):
            wait_for(f"http://127.0.0.1:{port}/healthz")
            hooks = {
                **os.environ,
                "SCHEMATHESIS_HOOKS": str(Path(__file__).resolve()),
                "FUZZ_DOWN_PORT": str(down.getsockname()[1]),
            }
            command = schemathesis_command(port, key, extra)
            print("fuzz:", " ".join(c if "Bearer" not in c else "<key>" for c in command))
            status = subprocess.run(command, cwd=logs, env=hooks).returncode  # noqa: S603
    print(f"fuzz: Flywheel's log is {logs / 'server.log'}")
    return status


if __name__ == "__main__":
    if sys.argv[1:2] == ["standin"]:
        import uvicorn

        _seed()
        uvicorn.run(standin, host="127.0.0.1", port=int(sys.argv[2]), log_level="error")
    else:
        sys.exit(main(sys.argv[1:]))

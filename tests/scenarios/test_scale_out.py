"""Scale-out: two web processes on one PostgreSQL and one Redis agree within a second.

The module starts two uvicorn processes serving ``flywheel.asgi:application``
(one worker each, A and B) on this suite's test database and cache prefix, and
two stand-in Flowise servers (bench/standin.py) as their backends. Each test
makes a change through A (its admin, or questions answered by it) and polls B
through B's own doors until B shows the change. The delay is measured from the
moment the change was made (the call that made it has returned, or the rows it
wrote are in the database) to the answer of B that first shows it, and must be
at most CONVERGENCE_SECONDS.

Every process keeps what routing and authentication read for about a second
(routing/selection/state.py MEMO_SECONDS, flywheel/services.py KEY_MEMO_SECONDS) in front
of the shared cache. Each test reads B just before the change, so B holds the
old state in memory when the change lands: the delay seen is what is left of
that second, plus one read.
"""

from __future__ import annotations

import functools
import os
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import connection
from django.test import Client as DjangoClient

from backends.models import BackendHealth
from backends.services import backend_create
from chatflows.models import Flow
from flywheel.cache import shared_cache
from flywheel.models import ApiKey, Tenant
from flywheel.services import api_key_create
from routing.install import defaults_load
from routing.models import PerformanceRecord, RoutingDecision, RoutingPolicy
from routing.selection.breaker import MIN_ATTEMPTS, scope_key
from routing.selection.state import SCOPES_KEY
from tests.paths import ROOT
from tests.routing_world import refresh

pytestmark = pytest.mark.django_db(transaction=True)

CONVERGENCE_SECONDS = 1.0  # what docs/using.md promises: "every process sees it within a second"
GIVE_UP_SECONDS = 5.0  # polling goes on past the promise, so a late change is measured too
POLL_SECONDS = 0.005
START_TIMEOUT = 60.0
INTENT = "general"  # given with each question: routing then depends on nothing learned


# --- processes -----------------------------------------------------------------------------


@dataclass
class Server:
    """A subprocess serving HTTP on a loopback port, its output in ``log``."""

    name: str
    port: int
    process: subprocess.Popen[bytes]
    log: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def tail(self, lines: int = 30) -> str:
        """The end of its log, for failure messages."""
        text = self.log.read_text(errors="replace") if self.log.exists() else ""
        return "\n".join(text.splitlines()[-lines:])


@dataclass
class Cluster:
    """Two web processes sharing the database and cache, and two stand-in backends."""

    a: Server
    b: Server
    primary: Server  # the stand-in behind the backend named "primary"
    secondary: Server
    http: httpx.Client


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _database_url() -> str:
    """The test database pytest-django made (its real name, not the configured one)."""
    db = connection.settings_dict
    auth = quote(db["USER"] or "") + (f":{quote(db['PASSWORD'])}" if db["PASSWORD"] else "")
    return f"postgres://{auth}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"


def _web_env(var_dir: Path) -> dict[str, str]:
    """The environment of a web process: this process's database, cache and prefix.

    The secret key is this process's too, so that an admin session made here
    (force_login) is valid there.
    """
    cache_url = os.environ.get("CACHE_URL")
    if not cache_url:
        pytest.fail("Run this with scripts/test.sh: the processes share the Redis of CACHE_URL.")
    env = {k: v for k, v in os.environ.items() if k != "PROMETHEUS_MULTIPROC_DIR"}
    return {
        **env,
        "DATABASE_URL": _database_url(),
        "CACHE_URL": cache_url,
        "FLYWHEEL_CACHE_PREFIX": settings.CACHES["default"]["KEY_PREFIX"],
        "DJANGO_SECRET_KEY": settings.SECRET_KEY,
        # Their spools and logs stay out of the suite's var/: both processes share this one.
        "FLYWHEEL_VAR_DIR": str(var_dir),
        "FLYWHEEL_BACKEND_ALLOWED_NETWORKS": "127.0.0.0/8",
        "FLYWHEEL_ONBOARD_NEW_BACKENDS": "false",
        "FLYWHEEL_RATE_LIMIT": "off",  # the polling is not what is being limited
        "FLYWHEEL_LOG_LEVEL": "WARNING",
        "PYTHONUNBUFFERED": "1",
    }


def _spawn(name: str, args: list[str], env: dict[str, str], logs: Path) -> Server:
    """Start ``python args...`` in the project directory on a free port (``{port}`` in args)."""
    port = _free_port()
    log = logs / f"{name}.log"
    with log.open("wb") as out:
        process = subprocess.Popen(  # noqa: S603 - our own interpreter and modules
            [sys.executable, *(a.format(port=port) for a in args)],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    return Server(name, port, process, log)


def _wait_until_up(server: Server, path: str, http: httpx.Client) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            pytest.fail(f"{server.name} exited ({server.process.returncode}):\n{server.tail()}")
        try:
            if http.get(server.url + path, timeout=1).status_code < 500:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    pytest.fail(f"{server.name} did not answer {path} in {START_TIMEOUT:.0f} s:\n{server.tail()}")


def _stop(server: Server) -> None:
    """SIGTERM (a web process then finishes its pending decision writes), SIGKILL if stuck."""
    if server.process.poll() is None:
        server.process.terminate()
        try:
            server.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.process.kill()
            server.process.wait(timeout=10)


@pytest.fixture(scope="module")
def cluster(django_db_setup: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """Web processes A and B and two stand-ins, started once for the module and always
    stopped (before the test database is dropped: their pooled connections would block it)."""
    logs = tmp_path_factory.mktemp("scale-out")
    env = _web_env(logs / "var")
    web = ["-m", "uvicorn", "flywheel.asgi:application", "--host", "127.0.0.1", "--port",
           "{port}", "--workers", "1", "--lifespan", "on", "--log-level", "warning"]  # fmt: skip
    standin = ["bench/standin.py", "{port}", "0"]
    with ExitStack() as stack:
        http = stack.enter_context(httpx.Client(timeout=10))
        servers = []
        # All four start together; each is stopped however the start-up ends.
        for name, args in (("a", web), ("b", web), ("primary", standin), ("secondary", standin)):
            server = _spawn(name, args, env, logs)
            stack.callback(_stop, server)
            servers.append(server)
        a, b, primary, secondary = servers
        for server, path in ((a, "/healthz"), (b, "/healthz")):
            _wait_until_up(server, path, http)
        for server in (primary, secondary):
            _wait_until_up(server, "/api/v1/ping", http)
        yield Cluster(a, b, primary, secondary, http)


# --- the routing world ---------------------------------------------------------------------


@dataclass
class World:
    """What one test routes over: a tenant's key, backends "primary" and "secondary" (each
    a stand-in with one flow for the intent), and the processes."""

    cluster: Cluster
    tenant: Tenant
    key: str
    flow_ids: dict[str, str]  # backend name -> its flow's external id (unique to this test)
    asked: int = 0  # questions answered through the processes: one decision each

    def ask(self, server: Server, key: str | None = None, **fields: Any) -> httpx.Response:
        """POST /api/v1/query on ``server`` (a real answer, and one decision); ``fields``
        go with the question."""
        answered = _post(self.cluster, server, "/api/v1/query", key or self.key, **fields)
        if answered.status_code == 200:
            self.asked += 1
        return answered

    def route(self, server: Server, key: str | None = None) -> httpx.Response:
        """POST /api/v1/route on ``server``: the dry run, what it would route to now."""
        return _post(self.cluster, server, "/api/v1/route", key or self.key)

    def candidates(self, server: Server) -> list[dict[str, Any]]:
        routed = self.route(server)
        assert routed.status_code == 200, routed.text
        return list(routed.json()["candidates"])

    def fail_every_answer_of(self, standin: Server) -> None:
        """Make a stand-in answer every prediction with a 500 (its ping still answers)."""
        self.cluster.http.post(f"{standin.url}/_faults", json={"fault": "500", "share": 1.0})


def _post(cluster: Cluster, server: Server, path: str, key: str, **fields: Any) -> httpx.Response:
    return cluster.http.post(
        server.url + path,
        json={"question": "How do these processes agree?", "intent": INTENT, **fields},
        headers={"Authorization": f"Bearer {key}"},
    )


@pytest.fixture
def make_world(cluster: Cluster, tenant: Tenant) -> Iterator[Callable[..., World]]:
    """Build the world in the database, and wait until both processes route over it.

    ``primary_keywords``: how many intent keywords the primary's flow has (the
    secondary's has one): with ten its match is 1.0. Match no longer orders the
    candidates: what routing learned does, and with no history the two tie and the
    tie goes to the name (the primary). Ends by waiting until the decisions of the
    questions asked are stored: written after the test, they would meet a flushed
    database.
    """
    built: list[World] = []

    def make(*, primary_keywords: int = 10) -> World:
        defaults_load()
        # Exploration (a draw from what routing believes of each) would, now and then,
        # put the other backend first on purpose.
        policy = RoutingPolicy.objects.get()
        policy.exploration = 0.0
        policy.save()
        token = uuid.uuid4().hex[:8]
        flow_ids = {}
        for name, standin, keywords in (
            ("primary", cluster.primary, primary_keywords),
            ("secondary", cluster.secondary, 1),
        ):
            backend = backend_create(
                name=name, kind="flowise", base_url=standin.url, trusted=True, timeout_seconds=2
            )
            BackendHealth.objects.create(backend=backend, healthy=True)
            flow_ids[name] = f"{name}-{token}"
            Flow.objects.create(
                backend=backend,
                external_id=flow_ids[name],
                name=f"{name} flow",
                deployed=True,
                intent_keywords=[INTENT, *(f"topic-{i}" for i in range(keywords - 1))],
            )
            cluster.http.post(f"{standin.url}/_faults", json={"fault": "", "share": 0.0})
        refresh()  # publish flows and health to the shared cache, as discovery would
        world = World(cluster, tenant, api_key_create(tenant=tenant, name="scale-out")[1], flow_ids)
        built.append(world)
        # The processes may remember the previous test's world for up to a second.
        expected = [flow_ids["primary"], flow_ids["secondary"]]
        for server in (cluster.a, cluster.b):
            seen = _first_seen(
                functools.partial(_routes_over, world, server, expected), since=time.monotonic()
            )
            assert seen is not None, f"{server.name} never routed over this test's backends"
        return world

    yield make
    asked = sum(world.asked for world in built)
    stored = _first_seen(lambda: RoutingDecision.objects.count() >= asked, since=time.monotonic())
    assert stored is not None, "the processes did not store the decisions of their answers"


def _routes_over(world: World, server: Server, flow_ids: list[str]) -> bool:
    """Whether ``server`` routes over exactly these flows, in this order."""
    return [c["flow_id"] for c in world.candidates(server)] == flow_ids


# --- measuring -----------------------------------------------------------------------------


def _first_seen(seen: Callable[[], bool], *, since: float) -> float | None:
    """Seconds from ``since`` until ``seen()`` first returned true (measured when the call
    that saw it returned); None if it did not within GIVE_UP_SECONDS."""
    while True:
        if seen():
            return time.monotonic() - since
        if time.monotonic() - since > GIVE_UP_SECONDS:
            return None
        time.sleep(POLL_SECONDS)


def _assert_within_a_second(delay: float | None, what: str, note: str = "") -> None:
    observed = f"not seen in {GIVE_UP_SECONDS:.0f} s" if delay is None else f"{delay:.3f} s"
    print(f"{what}: {observed}{note}")  # shown with -rP or -s: the delays, for the record
    expected = f"{what}: expected within {CONVERGENCE_SECONDS} s, observed {observed}{note}"
    assert delay is not None, expected
    assert delay <= CONVERGENCE_SECONDS, expected


# --- the admin, as a browser uses it -------------------------------------------------------


class _FormFields(HTMLParser):
    """What a browser submits from the form with id ``form_id``: each named input's value
    (a checkbox or radio only when checked), each select's chosen option, each textarea."""

    def __init__(self, form_id: str) -> None:
        super().__init__()
        self.form_id = form_id
        self.fields: dict[str, str] = {}
        self._inside = False
        self._select: str | None = None
        self._textarea: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        if tag == "form":
            self._inside = a.get("id") == self.form_id
        if not self._inside:
            return
        name, kind = a.get("name", ""), a.get("type", "text")
        if tag == "input" and name and kind not in {"submit", "button", "image", "file"}:
            if kind in {"checkbox", "radio"} and "checked" not in a:
                return
            self.fields[name] = a.get("value") or ("on" if kind == "checkbox" else "")
        elif tag == "select" and name:
            self._select = name
        elif tag == "option" and self._select and "selected" in a:
            self.fields[self._select] = a.get("value", "")
        elif tag == "textarea" and name:
            self._textarea, self.fields[name] = name, ""

    def handle_endtag(self, tag: str) -> None:
        if tag == "form":
            self._inside = False
        elif tag == "select":
            self._select = None
        elif tag == "textarea":
            self._textarea = None

    def handle_data(self, data: str) -> None:
        if self._textarea:
            self.fields[self._textarea] += data


class Admin:
    """A superuser's browser on one process's admin: its session was made here (as a
    login would), its CSRF token comes with each page, as in a browser."""

    def __init__(self, server: Server) -> None:
        user = get_user_model().objects.create_superuser("scale-admin", "admin@example.com")
        login = DjangoClient()
        login.force_login(user)
        session = login.cookies[settings.SESSION_COOKIE_NAME].value
        self.http = httpx.Client(
            base_url=server.url, cookies={settings.SESSION_COOKIE_NAME: session}, timeout=10
        )

    def form(self, path: str, form_id: str) -> dict[str, str]:
        page = self.http.get(path)
        assert page.status_code == 200, page.text[:500]
        parser = _FormFields(form_id)
        parser.feed(page.text)
        assert "csrfmiddlewaretoken" in parser.fields, f"no form {form_id!r} on {path}"
        return parser.fields

    def submit(self, path: str, fields: dict[str, str]) -> None:
        """POST the form; the admin answers a form it accepted with a redirect."""
        answered = self.http.post(path, data=fields)
        assert answered.status_code == 302, answered.text[:2000]


# --- the tests -----------------------------------------------------------------------------


def test_a_policy_edit_in_one_process_admin_changes_the_other_process_scores_within_a_second(
    make_world: Callable[..., World],
) -> None:
    world = make_world()
    a, b = world.cluster.a, world.cluster.b
    admin = Admin(a)
    change = f"/admin/routing/routingpolicy/{RoutingPolicy.objects.get().pk}/change/"
    form = admin.form(change, "routingpolicy_form")
    assert form["weight_match"] == "0.5"
    # B scores the primary with the default weights: 0.5 * match 1.0 + 0.3 * healthy 1.0
    # + 0.2 * performance (no history yet: the prior's 80 % success and 1 s typical).
    no_history = 0.7 * 0.8 + 0.3 * (1 - 1000 / 5000)
    assert world.candidates(b)[0]["score"] == pytest.approx(0.5 + 0.3 + 0.2 * no_history)

    admin.submit(change, {**form, "weight_match": "0.9"})
    made = time.monotonic()

    edited = 0.9 + 0.3 + 0.2 * no_history
    delay = _first_seen(
        lambda: world.candidates(b)[0]["score"] == pytest.approx(edited), since=made
    )
    _assert_within_a_second(delay, "policy edit via A's admin, seen in B's dry run")
    assert RoutingPolicy.objects.get().weight_match == 0.9


def test_a_key_revoked_in_one_process_admin_is_refused_by_the_other_within_a_second(
    make_world: Callable[..., World],
) -> None:
    world = make_world()
    a, b = world.cluster.a, world.cluster.b
    doomed, raw = api_key_create(tenant=world.tenant, name="doomed")
    # In use on both: the first use reads the database and fills the shared cache, the
    # second is recalled from the cache and kept in the process's own memory.
    for server in (a, a, b, b):
        assert world.route(server, raw).status_code == 200
    admin = Admin(a)
    fields = admin.form("/admin/flywheel/apikey/", "changelist-form")
    assert world.route(b, raw).status_code == 200

    admin.submit(
        "/admin/flywheel/apikey/",
        {**fields, "action": "revoke", "_selected_action": str(doomed.pk), "index": "0"},
    )
    made = time.monotonic()

    # The process that revoked it forgets it at once, memory included.
    assert world.route(a, raw).status_code == 401
    delay = _first_seen(lambda: world.route(b, raw).status_code == 401, since=made)
    _assert_within_a_second(delay, "key revoked via A's admin, refused by B")
    assert ApiKey.objects.get(pk=doomed.pk).revoked_at is not None
    assert world.route(b).status_code == 200  # the tenant's other key still works


def test_a_breaker_opened_by_failures_in_one_process_keeps_the_other_off_it_within_a_second(
    make_world: Callable[..., World],
) -> None:
    world = make_world()
    a, b = world.cluster.a, world.cluster.b
    world.fail_every_answer_of(world.cluster.primary)
    assert [c["backend"] for c in world.candidates(b)] == ["primary", "secondary"]
    primary_flow = Flow.objects.get(external_id=world.flow_ids["primary"])
    scope = scope_key((primary_flow.backend_id, primary_flow.pk, INTENT))

    # Enough failed answers in A's window to open the breaker of the primary's flow for
    # the intent (routing/selection/breaker.py: 500s from one flow open its scope, not the
    # backend), from two tenants (one's alone do not open a shared backend's). Each
    # question names the primary's flow, with fallback: what A learns of the failures
    # would otherwise put the secondary first at once. Each is answered by the secondary.
    other = Tenant.objects.create(name="Other", slug="other")
    keys = (world.key, api_key_create(tenant=other, name="scale-out")[1])
    for n in range(MIN_ATTEMPTS):
        answered = world.ask(a, keys[n % 2], flow=world.flow_ids["primary"], fallback=True)
        assert answered.status_code == 200, answered.text
        chain = answered.json()["routing"]["fallback_chain"]
        assert [(s["backend"], s["ok"]) for s in chain] == [("primary", False), ("secondary", True)]
    answered_at = time.monotonic()
    # A opens the breaker on a thread of its own, just after the answer, in the shared cache.
    opened = _first_seen(lambda: scope in _open_scopes(), since=answered_at)
    assert opened is not None, "A did not open the breaker of the primary's flow"
    made = time.monotonic()

    delay = _first_seen(
        lambda: [c["backend"] for c in world.candidates(b)] == ["secondary"], since=made
    )
    after_answer = "" if delay is None else f" ({made - answered_at + delay:.3f} s after answering)"
    _assert_within_a_second(delay, "A's breaker opened, B leaves the flow out", after_answer)
    assert _open_scopes()[scope]["until"] > time.time()
    assert BackendHealth.objects.get(backend__name="primary").cooldown_until is None  # one flow
    # B does not even try it: its answer comes from the secondary, first time.
    answered = world.ask(b)
    assert answered.status_code == 200, answered.text
    assert [s["backend"] for s in answered.json()["routing"]["fallback_chain"]] == ["secondary"]


def _open_scopes() -> dict[str, dict[str, Any]]:
    """The flow scopes out of rotation, as the processes share them."""
    return dict(shared_cache().get(SCOPES_KEY) or {})


def test_attempts_made_by_one_process_change_the_performance_the_other_routes_on_within_a_second(
    make_world: Callable[..., World],
) -> None:
    world = make_world(primary_keywords=1)  # the two match alike
    a, b = world.cluster.a, world.cluster.b
    world.fail_every_answer_of(world.cluster.primary)
    before = world.candidates(b)
    # No history anywhere: both are judged by the prior, the tie goes to the name.
    no_history = round(0.7 * 0.8 + 0.3 * (1 - 1000 / 5000), 4)
    assert [(c["backend"], c["performance"], c["attempts"]) for c in before] == [
        ("primary", no_history, 0),
        ("secondary", no_history, 0),
    ]

    # One question through A: the primary fails, the secondary answers. Both attempts
    # become performance records, written behind the answer (A's decision writer gathers
    # for up to 0.1 s), and the evidence folded from them is published to the shared cache.
    answered = world.ask(a)
    answered_at = time.monotonic()
    assert answered.status_code == 200, answered.text
    assert answered.json()["routing"]["backend"] == "secondary"
    stored = _first_seen(lambda: PerformanceRecord.objects.count() == 2, since=answered_at)
    assert stored is not None, "A did not store the attempts' performance records"
    made = time.monotonic()

    delay = _first_seen(lambda: world.candidates(b)[0]["backend"] == "secondary", since=made)
    after_answer = "" if delay is None else f" ({made - answered_at + delay:.3f} s after answering)"
    _assert_within_a_second(delay, "A's performance records, B routes on them", after_answer)
    seen = {c["backend"]: c for c in world.candidates(b)}
    assert seen["secondary"]["attempts"] == seen["primary"]["attempts"] == 1  # A's, one each
    assert seen["primary"]["success"] < 0.8  # failed: below the prior
    assert seen["secondary"]["success"] > seen["primary"]["success"]
    assert seen["secondary"]["performance"] > seen["primary"]["performance"]
    assert seen["secondary"]["expected_seconds"] < seen["primary"]["expected_seconds"]

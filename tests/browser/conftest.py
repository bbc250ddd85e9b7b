"""Browser tests: Flywheel served by uvicorn, driven by Playwright in Debian's chromium.

Usage (mark the module ``pytestmark = pytest.mark.browser``)::

    def test_home(page: Page) -> None:            # a fresh browser context, unauthenticated
        page.goto("/admin/login/")                 # relative to the served base URL

    def test_admin(admin_page: Page) -> None:      # logged in as a superuser via /admin/login/
        ...

    def test_member(page: Page, log_in_as) -> None:
        log_in_as(user)                            # any user object, staff or not
        page.goto("/...")

    def test_missing(page: Page, page_errors: PageErrors) -> None:
        page_errors.expect("/static/nope.js", 404) # a 4xx/5xx the test wants

Fixtures:

- ``live_url -> str``: base URL (``http://127.0.0.1:PORT``) of one uvicorn process
  (``flywheel.asgi:application --lifespan on``) serving the pytest-django TEST
  database and this process's cache, broker and var/ settings (the environment of
  scripts/test.sh). It requests ``transactional_db``: the data a test writes is
  committed, so the server process sees it (write it with the ORM as usual; the
  tables are emptied after each test). The server runs once for tests/browser;
  its output goes to var/test/browser-server.log.
- ``browser -> Browser``: headless /usr/bin/chromium (scripts/ensure_browser.sh
  installs it; Playwright never downloads a browser).
- ``page -> Page``: a new context per test with ``base_url=live_url``. At teardown it
  saves var/test/screenshots/<test name>.png and fails the test (an error at
  teardown) if the page logged a console error, threw an uncaught exception, had a
  request fail, got a response >= 400 the test did not declare with
  ``page_errors.expect(path, status)``, or asked for anything outside the served
  127.0.0.1 port (such requests are aborted: everything must work offline).
- ``page_errors -> PageErrors``: what ``page`` recorded; ``expect()`` as above.
- ``superuser -> User`` (username ``admin``, password ``SUPERUSER_PASSWORD``) and
  ``admin_page -> Page``: ``page`` logged in as that superuser through the login form.
- ``log_in_as -> Callable[[User], None]``: logs any user into ``page``'s
  context by planting a session cookie (the admin's form refuses non-staff users).

Write the tests here as plain ``def`` functions: sync Playwright keeps its event loop
marked as running in the main thread, so an ``async def`` test cannot run beside it
(and ``browser`` sets DJANGO_ALLOW_ASYNC_UNSAFE while it is up, so that the tests'
ordinary ORM calls are allowed; the server never inherits it).

``snap(page, name)`` saves a full-page screenshot under var/test/screenshots/ at any
point (CI keeps that folder as an artefact).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, NoReturn
from urllib.parse import urlsplit, urlunsplit

import httpx
import pytest
from django.conf import settings
from django.contrib.auth.models import User
from django.test import Client
from playwright.sync_api import (
    Browser,
    BrowserContext,
    ConsoleMessage,
    Page,
    Request,
    Response,
    Route,
    WebError,
    WebSocket,
    sync_playwright,
)

from bench.common import free_port
from tests.paths import ROOT

ARTEFACTS = ROOT / "var" / "test"
SCREENSHOTS = ARTEFACTS / "screenshots"
SERVER_LOG = ARTEFACTS / "browser-server.log"

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",  # CI runs as root, where chromium's sandbox refuses to start
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    # Chromium's own calls home (updates, sync, field trials) are not the page's.
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
SUPERUSER_PASSWORD = "browser-tests-password"


# --- The served app -------------------------------------------------------------------


def served_database_url() -> str:
    """This process's DATABASE_URL, naming the test database pytest-django created."""
    url = os.environ.get("DATABASE_URL")
    if not url:
        pytest.fail("browser tests need DATABASE_URL (run them with scripts/test.sh)")
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path="/" + settings.DATABASES["default"]["NAME"]))


def start_server(port: int, log: IO[bytes]) -> subprocess.Popen[bytes]:
    """uvicorn serving flywheel.asgi on 127.0.0.1:``port``, its output going to ``log``.

    It inherits this process's environment, so it shares the cache prefix, Redis,
    broker and var/ dir that scripts/test.sh set; only the database is the test one.
    """
    command = [
        sys.executable, "-m", "uvicorn", "flywheel.asgi:application",
        "--lifespan", "on", "--host", "127.0.0.1", "--port", str(port),
    ]  # fmt: skip
    env = {**os.environ, "DATABASE_URL": served_database_url(), "PYTHONUNBUFFERED": "1"}
    env.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)  # the browser fixture's; the server must check
    return subprocess.Popen(  # noqa: S603 - our own interpreter and module
        command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT
    )


def wait_until_up(server: subprocess.Popen[bytes], url: str, timeout: float = 30.0) -> None:
    """Return once ``url``/healthz answers 200; fail with the end of the server's log if it
    exited, answered anything else or did not answer within ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.poll() is not None:
            fail_with_log(f"the test server exited with {server.returncode}")
        try:
            status = httpx.get(f"{url}/healthz", timeout=1).status_code
        except httpx.HTTPError:
            time.sleep(0.1)  # not listening yet
            continue
        if status != 200:
            fail_with_log(f"the test server answered /healthz with {status}")
        return
    fail_with_log(f"the test server did not answer in {timeout:.0f} s")


def fail_with_log(reason: str) -> NoReturn:
    tail = SERVER_LOG.read_text(errors="replace").splitlines()[-25:]
    pytest.fail(f"{reason}; the end of {SERVER_LOG}:\n" + "\n".join(tail), pytrace=False)


def stop_server(server: subprocess.Popen[bytes]) -> None:
    """SIGTERM (uvicorn then runs the lifespan shutdown), SIGKILL after 10 s."""
    server.terminate()
    try:
        server.wait(timeout=10)
    except subprocess.TimeoutExpired:
        server.kill()
        server.wait()


@pytest.fixture(scope="package")
def flywheel_server(django_db_setup: None) -> Iterator[str]:
    """One server for the browser tests, stopped before the test database is dropped
    (its pooled connections would keep PostgreSQL from dropping it)."""
    ARTEFACTS.mkdir(parents=True, exist_ok=True)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with SERVER_LOG.open("wb") as log:
        server = start_server(port, log)
        try:
            wait_until_up(server, url)
            yield url
        finally:
            stop_server(server)


@pytest.fixture
def live_url(flywheel_server: str, transactional_db: None) -> str:
    """Base URL of the served app; the test's data is committed, so the server sees it."""
    return flywheel_server


# --- The browser ----------------------------------------------------------------------


@pytest.fixture(scope="package")
def browser() -> Iterator[Browser]:
    """Headless Debian chromium. Sync Playwright refuses a running asyncio loop: keep
    the fixtures and tests that use it plain ``def`` functions."""
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: run scripts/ensure_browser.sh")
    with pytest.MonkeyPatch.context() as patch, sync_playwright() as playwright:
        # Sync Playwright leaves its event loop marked as running in this thread, so
        # Django would refuse the tests' plain ORM calls as made "from an async context".
        # They are not: allow them while the browser is up (the server never inherits this).
        patch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
        launched = playwright.chromium.launch(
            executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS
        )
        yield launched
        launched.close()


@dataclass
class PageErrors:
    """Everything that went wrong in a test's browser context, as readable lines."""

    origin: str  # scheme://host:port of the served app; anything else is outside
    found: list[str] = field(default_factory=list)
    expected: set[tuple[str, int]] = field(default_factory=set)

    def expect(self, path: str, status: int) -> None:
        """Declare that a response with ``status`` to ``path`` (e.g. "/admin/x/") is wanted."""
        self.expected.add((path, status))

    def watch(self, context: BrowserContext) -> None:
        """Record the context's errors, and abort (and record) requests to other hosts."""
        context.route(lambda url: not self.is_local(url), self.refuse)
        context.on("console", self.on_console)
        context.on("weberror", self.on_web_error)
        context.on("requestfailed", self.on_request_failed)
        context.on("response", self.on_response)
        context.on("page", lambda page: page.on("websocket", self.on_websocket))

    def is_local(self, url: str) -> bool:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https", "ws", "wss"):
            return True  # data:, blob:, about: never leave the browser
        return f"{parts.hostname}:{parts.port}" == urlsplit(self.origin).netloc

    def is_expected(self, url: str, status: int) -> bool:
        return (urlsplit(url).path, status) in self.expected

    def add(self, problem: str) -> None:
        self.found.append(problem)

    def refuse(self, route: Route) -> None:
        self.add(f"outside request: {route.request.method} {route.request.url}")
        route.abort("blockedbyclient")

    def on_console(self, message: ConsoleMessage) -> None:
        if message.type != "error":
            return
        # Chromium logs every failed load as a console error too: a declared status or an
        # outside request (recorded when it was refused) is not a second problem.
        url = message.location.get("url", "")
        if message.text.startswith("Failed to load resource") and (
            not self.is_local(url) or any(path == urlsplit(url).path for path, _ in self.expected)
        ):
            return
        self.add(f"console error: {message.text} ({url})")

    def on_web_error(self, error: WebError) -> None:
        self.add(f"uncaught exception: {error.error}")

    def on_request_failed(self, request: Request) -> None:
        if self.is_local(request.url):  # outside ones were recorded when refused
            self.add(f"request failed: {request.method} {request.url}: {request.failure}")

    def on_response(self, response: Response) -> None:
        if response.status >= 400 and not self.is_expected(response.url, response.status):
            self.add(f"HTTP {response.status}: {response.request.method} {response.url}")

    def on_websocket(self, socket: WebSocket) -> None:
        if not self.is_local(socket.url):  # routes do not see websockets
            self.add(f"outside websocket: {socket.url}")


def snap(page: Page, name: str) -> Path:
    """Save a full-page PNG of ``page`` as var/test/screenshots/<name>.png; its path."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / (re.sub(r"[^A-Za-z0-9_.-]+", "_", name).strip("_") + ".png")
    page.screenshot(path=path, full_page=True)
    return path


@pytest.fixture
def page_errors(live_url: str) -> PageErrors:
    return PageErrors(origin=live_url)


@pytest.fixture
def page(
    browser: Browser, live_url: str, page_errors: PageErrors, request: pytest.FixtureRequest
) -> Iterator[Page]:
    """A page in a context of its own; screenshot and error check at teardown."""
    context = browser.new_context(base_url=live_url)
    context.set_default_timeout(10_000)  # a missing element fails in 10 s, not 30
    page_errors.watch(context)
    opened = context.new_page()
    try:
        yield opened
        snap(opened, request.node.name)  # also lets the last events arrive
    finally:
        context.close()
    if page_errors.found:
        pytest.fail("the browser saw problems:\n  " + "\n  ".join(page_errors.found))


# --- Logging in -----------------------------------------------------------------------


def log_in_with_form(page: Page, username: str, password: str) -> None:
    """Log in through /admin/login/ (the project's LOGIN_URL); staff users only.
    Returns on the page the form led to; fails if the form refused the login."""
    page.goto("/admin/login/")
    page.fill("#id_username", username)
    page.fill("#id_password", password)
    with page.expect_navigation():
        page.locator("#login-form [type=submit]").click()
    if urlsplit(page.url).path == "/admin/login/":
        pytest.fail(f"logging in as {username!r} was refused")
    # The admin's index loads its icons after the page: a test that goes elsewhere at
    # once would abort them, and the harness would report those as failed requests.
    page.wait_for_load_state("networkidle")


@pytest.fixture
def superuser(transactional_db: None) -> User:
    return User.objects.create_superuser("admin", "admin@example.com", SUPERUSER_PASSWORD)


@pytest.fixture
def admin_page(page: Page, superuser: User) -> Page:
    """``page`` logged in as ``superuser`` through the admin's login form."""
    log_in_with_form(page, superuser.get_username(), SUPERUSER_PASSWORD)
    return page


@pytest.fixture
def log_in_as(page: Page, live_url: str) -> Callable[[User], None]:
    """Log any user (staff or not) into ``page``'s context: a session is made in the
    test database, shared with the server, and its cookie planted in the browser."""

    def log_in(user: User) -> None:
        client = Client()
        client.force_login(user)
        cookie = client.cookies[settings.SESSION_COOKIE_NAME]
        page.context.add_cookies(
            [{"name": cookie.key, "value": cookie.value, "url": live_url, "httpOnly": True}]
        )

    return log_in

"""The chat page answered by the real Flowise and Langflow of `make peers`."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import pytest
from django.contrib.auth.models import User
from django.db import connections
from playwright.sync_api import Page, expect

from backends.adapters.base import BackendConfig
from flywheel.models import Membership, Tenant
from routing.install import defaults_load
from tests.browser.conftest import snap

# The live fixtures live beside the live tests: imported, they serve this module too.
from tests.live.conftest import (  # noqa: F401
    flowise_config,
    langflow_config,
    peers,
    register_peers,
    serve_code_review,
)
from tests.routing_world import refresh

pytestmark = [pytest.mark.live, pytest.mark.browser]

QUESTION = "Please review my pull request"


@pytest.fixture
def peer_backends(
    live_url: str,
    flowise_config: BackendConfig,  # noqa: F811 - the imported fixture, by name
    langflow_config: BackendConfig,  # noqa: F811
    peers: dict[str, str],  # noqa: F811
) -> None:
    """Both peers registered, discovered and probed; published for the served process."""
    defaults_load()
    register_peers(flowise_config, langflow_config)
    # It runs the adapters on an event loop of its own: not in this thread, where the
    # browser's loop is already running.
    with ThreadPoolExecutor(1) as worker:
        worker.submit(_in_thread, serve_code_review, peers).result()
    refresh()


def _in_thread(work: Callable[..., None], *args: object) -> None:
    try:
        work(*args)
    finally:
        connections.close_all()  # this thread's connections, before the test database goes


def test_the_chat_is_answered_by_a_real_peer(page: Page, log_in_as, peer_backends) -> None:
    user = User.objects.create_user("alice", password="x")
    Membership.objects.create(user=user, tenant=Tenant.objects.create(name="Live", slug="live"))
    log_in_as(user)
    page.goto("/chat/")

    page.fill("#question", QUESTION)
    page.click("#send")

    answer = page.locator(".msg.bot").first
    expect(answer.locator(".meta a.trace")).to_be_visible(timeout=30_000)
    expect(answer.locator(".bubble")).to_have_text(f"Echo: {QUESTION}")
    expect(answer.locator(".intent")).to_contain_text("code-review")
    expect(answer.locator(".meta")).to_contain_text("Answered by flowise-live")
    expect(page.locator("#conversations li .q")).to_have_text([QUESTION])
    snap(page, "chat-live-peers")

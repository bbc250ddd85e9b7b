"""The pages in a real browser: each renders without a console error or a failed
request, the charts draw, filters change the numbers, and the chat answers."""

from __future__ import annotations

import subprocess
import sys
import uuid
from collections.abc import Iterator
from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.utils import timezone
from playwright.sync_api import Page, expect

from backends.models import Backend, BackendHealth, HealthCheck
from bench.common import free_port, wait_for
from chatflows.models import Flow
from flywheel.models import Membership, Tenant
from routing.install import defaults_load
from routing.models import RoutingDecision, Session, Turn
from tests.browser.conftest import snap
from tests.routing_world import refresh

pytestmark = [pytest.mark.browser]

QUESTION = "Please review my pull request"


@pytest.fixture(scope="module")
def standin_url() -> Iterator[str]:
    """bench/standin.py: a Flowise stand-in on loopback that echoes the question."""
    port = free_port()
    process = subprocess.Popen(  # noqa: S603 - our own interpreter and script
        [sys.executable, "bench/standin.py", str(port), "0"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for(f"{url}/api/v1/ping")
        yield url
    finally:
        process.terminate()
        process.wait(10)


@pytest.fixture
def standin(live_url: str, standin_url: str) -> Backend:
    """The stand-in registered as a healthy shared backend whose flow serves every intent,
    with an hour of health probes; published for routing in every process."""
    defaults_load()
    backend = Backend.objects.create(
        name="standin", kind="flowise", base_url=standin_url, allow_private_addresses=True
    )
    BackendHealth.objects.create(backend=backend, healthy=True, last_checked_at=timezone.now())
    Flow.objects.create(
        backend=backend,
        external_id="standin-flow",
        name="echo",
        deployed=True,
        is_generic=True,
        intent_keywords=["code-review", "general", "summarize"],
    )
    now = timezone.now()
    for minutes in range(0, 60, 5):
        check = HealthCheck.objects.create(backend=backend, ok=minutes != 25, latency_ms=3)
        HealthCheck.objects.filter(pk=check.pk).update(checked_at=now - timedelta(minutes=minutes))
    refresh()
    return backend


def _member(tenant: Tenant) -> User:
    user = User.objects.create_user("alice", password="x")
    Membership.objects.create(user=user, tenant=tenant)
    return user


def _ask_in_chat(page: Page, question: str) -> None:
    page.fill("#question", question)
    page.click("#send")
    expect(page.locator(".msg.bot .meta a.trace").last).to_be_visible()


def test_the_chat_answers_and_the_sidebar_shows_the_conversation(
    page: Page, log_in_as, standin: Backend
) -> None:
    log_in_as(_member(Tenant.objects.create(name="Acme", slug="acme")))
    page.goto("/chat/")
    heading = page.locator("h1 + span.muted")
    assert heading.inner_text().strip() == "as Acme · new conversation"  # no lone "·"

    _ask_in_chat(page, QUESTION)

    expect(heading).to_have_text("as Acme · new conversation · this conversation's diagram")
    answer = page.locator(".msg.bot").first
    expect(answer.locator(".bubble")).to_have_text(f"Echo: {QUESTION}")
    expect(answer.locator(".intent")).to_contain_text("Intent: code-review")
    expect(answer.locator(".meta")).to_contain_text("Answered by standin / echo")
    expect(page.locator("#conversations li .q")).to_have_text([QUESTION])
    snap(page, "chat-answered")

    _ask_in_chat(page, "And please review the tests too")
    expect(page.locator("#conversations li .p")).to_contain_text(["2 turns"])

    with page.expect_navigation():
        answer.locator("a.trace").click()
    expect(page.locator("#answer")).to_contain_text(f"Echo: {QUESTION}")
    expect(page.locator("#answered-by")).to_contain_text("standin / echo")


def test_a_past_conversation_can_be_continued(page: Page, log_in_as, standin: Backend) -> None:
    log_in_as(_member(Tenant.objects.create(name="Acme", slug="acme")))
    page.goto("/chat/")
    _ask_in_chat(page, QUESTION)
    # The list is fetched again after the answer: on a busy machine it may still read
    # "None yet." when clicked, and the click then opens nothing.
    expect(page.locator("#conversations li .q")).to_have_text([QUESTION])
    page.click("#new-conversation")
    expect(page.locator(".msg")).to_have_count(0)

    page.locator("#conversations li").first.click()

    expect(page.locator(".msg.user .bubble")).to_have_text([QUESTION])
    _ask_in_chat(page, "Please review it again")
    expect(page.locator("#conversations li")).to_have_count(1)  # the same conversation
    expect(page.locator("#conversations li .p")).to_contain_text(["2 turns"])


def _decisions(tenant: Tenant, backend: Backend) -> RoutingDecision:
    """Two intents' decisions with attempts, a session with two turns; returns the last."""
    session = Session.objects.create(tenant=tenant)
    last = None
    for i, (intent, ok) in enumerate([("code-review", True), ("summarize", False)] * 3):
        last = RoutingDecision.objects.create(
            tenant=tenant,
            session=session if i < 2 else None,
            question=f"Question {i} about {intent}",
            intent=intent,
            intent_method="rules",
            evidence={"intent": ["(" + "x" * 600 + ")"]},  # a long regex: must wrap
            outcome="success" if ok else "failed",
            error_type="" if ok else "BackendError",
            error_message="" if ok else "No backend could answer the 'summarize' question.",
            backend=backend if ok else None,
            total_ms=120,
            fallback_chain=[
                {
                    "backend": "standin",
                    "flow": "echo",
                    "ok": ok,
                    "latency_ms": 100.0,
                    "error_type": "" if ok else "BackendError",
                    "error": "" if ok else "boom",
                }
            ],
        )
        last.attempts.create(backend=backend, intent=intent, latency_ms=100 + i, success=ok)
        if i < 2 and ok:
            Turn.objects.create(session=session, question=last.question, answer="An answer",
                                intent=intent, decision=last)  # fmt: skip
    assert last is not None
    return last


def test_every_page_renders_cleanly_and_the_charts_draw(admin_page: Page, standin: Backend) -> None:
    tenant = Tenant.objects.create(name="Acme", slug="acme")
    failed = _decisions(tenant, standin)
    session = RoutingDecision.objects.exclude(session=None).first()
    assert session is not None

    for path in ["/", "/analytics/", "/analytics/decisions/", "/chat/",
                 f"/decisions/{failed.request_id}", f"/v/{session.session_id}/",
                 "/admin/"]:  # fmt: skip
        admin_page.goto(path)
        expect(admin_page.locator("main, #content").first).to_be_visible()
        snap(admin_page, "page" + path.replace("/", "_"))
    admin_page.goto("/analytics/?range=1h")

    assert admin_page.locator("svg.chart rect.bar").count() >= 6
    assert admin_page.locator("#traffic polyline.series").count() >= 1
    assert admin_page.locator("#health rect.health.up").count() >= 5
    assert admin_page.locator("#health rect.health.down").count() >= 1


# Per chart: its width over its card's, the smallest size its text is drawn at, and
# the span of its coloured cells (health) as fractions of the chart's width.
MEASURE_CHART = """(selector) => {
    const svg = document.querySelector(selector);
    const card = svg.closest(".card");
    const drawn = [...svg.querySelectorAll("text")].map(
        (t) => parseFloat(getComputedStyle(t).fontSize) * t.getScreenCTM().a);
    const box = svg.getBoundingClientRect();
    const cells = [...svg.querySelectorAll("rect.health")].map((r) => r.getBoundingClientRect());
    return {
        share: box.width / card.clientWidth,
        smallest: Math.min(...drawn),
        texts: drawn.length,
        from: cells.length ? (Math.min(...cells.map((c) => c.left)) - box.left) / box.width : null,
        to: cells.length ? (Math.max(...cells.map((c) => c.right)) - box.left) / box.width : null,
    };
}"""


@pytest.mark.parametrize("width", [1400, 800])
def test_the_analytics_charts_fill_their_cards_with_readable_text(
    admin_page: Page, standin: Backend, width: int
) -> None:
    _decisions(Tenant.objects.create(name="Acme", slug="acme"), standin)
    admin_page.set_viewport_size({"width": width, "height": 1000})

    admin_page.goto("/analytics/?range=1h")
    snap(admin_page, f"analytics-{width}")

    for chart in ("#traffic svg.chart", "#comparison svg.chart", "#health svg.chart"):
        measured = admin_page.evaluate(MEASURE_CHART, chart)
        assert measured["share"] >= 0.9, (chart, measured)
        assert measured["texts"] >= 3, (chart, measured)
        assert measured["smallest"] >= 11, (chart, measured)
    ticks = admin_page.locator("#traffic text.tick.x")
    assert ticks.count() >= 4
    health = admin_page.evaluate(MEASURE_CHART, "#health svg.chart")
    assert health["from"] <= 0.1, health  # the probes of the whole hour span the strip
    assert health["to"] >= 0.9, health


def test_the_trace_page_wraps_long_evidence_and_shows_the_error(
    admin_page: Page, standin: Backend
) -> None:
    failed = _decisions(Tenant.objects.create(name="Acme", slug="acme"), standin)

    admin_page.goto(f"/decisions/{failed.request_id}")

    expect(admin_page.locator("#error")).to_contain_text("No backend could answer")
    overflow = admin_page.evaluate(
        "document.documentElement.scrollWidth - document.documentElement.clientWidth"
    )
    assert overflow <= 0


def test_the_filters_change_the_numbers(admin_page: Page, standin: Backend) -> None:
    _decisions(Tenant.objects.create(name="Acme", slug="acme"), standin)
    _decisions(Tenant.objects.create(name="Globex", slug="globex"), standin)
    admin_page.goto("/analytics/")
    row = admin_page.locator('tr[data-intent="code-review"] td.requests')
    expect(row).to_have_text("6")

    admin_page.select_option("select[name=tenant]", "acme")
    with admin_page.expect_navigation():
        admin_page.click("#filters button[type=submit]")
    expect(row).to_have_text("3")

    admin_page.select_option("select[name=intent]", "summarize")
    with admin_page.expect_navigation():
        admin_page.click("#filters button[type=submit]")
    expect(row).to_have_count(0)
    expect(admin_page.locator('tr[data-intent="summarize"] td.requests')).to_have_text("3")


def test_the_front_page_shows_the_first_steps_with_no_backend(admin_page: Page) -> None:
    admin_page.goto("/")

    expect(admin_page.locator("#first-steps")).to_contain_text("No backend is registered yet")


def test_an_unknown_session_is_a_clean_404(admin_page: Page, page_errors) -> None:
    path = f"/v/{uuid.uuid4()}/"
    page_errors.expect(path, 404)

    admin_page.goto(path)

    expect(admin_page.locator("h1")).to_have_text("Not found")

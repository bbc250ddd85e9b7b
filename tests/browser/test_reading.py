"""What people read, measured in the browser: table cells keep short words whole, the
admin's home lays out its page links and its recent actions, and every page has an icon."""

from __future__ import annotations

import httpx
import pytest
from playwright.sync_api import Page, expect

from backends.models import Backend
from flywheel.models import Tenant
from routing.models import RoutingDecision
from tests.browser.conftest import snap

pytestmark = [pytest.mark.browser]

WIDTHS = [1400, 800]
LONG_ERROR = "The backend did not answer within the time allowed for this flow. " * 3
# A token no line holds: it may break anywhere, but must not widen the page.
LONG_URL = (
    "http://flowise-production-eu-west-1.internal.example.com:3000/api/v1/prediction/" + "f" * 36
)

# Each cell (or header) whose text is one short token, with how many lines it takes:
# the distinct tops of its text's line boxes.
WRAPPED_WORDS = """(selector) => [...document.querySelectorAll(selector)].flatMap((cell) => {
  const text = cell.textContent.trim();
  if (!text || /\\s/.test(text) || text.length > 24) return [];
  const range = document.createRange();
  range.selectNodeContents(cell);
  const tops = new Set([...range.getClientRects()]
    .filter((r) => r.width > 0 && r.height > 0).map((r) => Math.round(r.top)));
  return tops.size > 1 ? [`${text} (${tops.size} lines)`] : [];
})"""


@pytest.fixture
def failed_decision(live_url: str) -> RoutingDecision:
    """A tenant "default", a backend "my-flowise", decisions that succeeded, and one whose
    first attempt failed with a long error before a second backend answered."""
    tenant = Tenant.objects.create(name="Default", slug="default")
    backend = Backend.objects.create(name="my-flowise", kind="flowise", base_url="http://x")
    for i in range(3):
        RoutingDecision.objects.create(
            tenant=tenant,
            question=f"Question {i}: " + "please summarise the long report we talked about " * 3,
            intent="code-review",
            outcome="success",
            backend=backend,
            total_ms=1234.5,
        )
    attempt = {"backend": "my-flowise", "flow": "default", "latency_ms": 1234.5}
    return RoutingDecision.objects.create(
        tenant=tenant,
        question=f"What went wrong with {LONG_URL}?",
        intent="code-review",
        outcome="success",
        backend=backend,
        candidates=[
            {
                "backend": "my-flowise",
                "flow": "default",
                "success": 0.9,
                "success_margin": 0.05,
                "attempts": 12,
                "typical_ms": 800,
                "expected_seconds": 0.9,
                "score": 0.75,
                "generic": False,
            },
        ],
        fallback_chain=[
            {
                **attempt,
                "ok": False,
                "error_type": "BackendTimeout",
                "error": f"{LONG_URL}: {LONG_ERROR}",
            },
            {**attempt, "ok": True, "error_type": "", "error": ""},
        ],
        total_ms=2469,
    )


@pytest.mark.parametrize("width", WIDTHS)
def test_table_cells_keep_short_words_on_one_line(
    admin_page: Page, failed_decision: RoutingDecision, width: int
) -> None:
    admin_page.set_viewport_size({"width": width, "height": 900})

    pages = {
        "decisions": "/analytics/decisions/",
        "trace": f"/decisions/{failed_decision.request_id}",
        "analytics": "/analytics/?range=1h",
    }
    for name, path in pages.items():
        admin_page.goto(path)
        snap(admin_page, f"cells-{name}-{width}")
        assert admin_page.evaluate(WRAPPED_WORDS, "main th, main td") == [], path
        # A table too wide for the screen scrolls in its box; the page itself does not.
        assert admin_page.evaluate("document.documentElement.scrollWidth") <= width, path


ADMIN_LAYOUT = """() => {
  const box = (el) => el.getBoundingClientRect();
  const links = [...document.querySelectorAll("#flywheel-today a")].map((a) => box(a).top);
  return {
    linkTops: links.map(Math.round),
    contentTop: box(document.querySelector("#content")).top,
    recentTop: box(document.querySelector("#recent-actions-module")).top,
  };
}"""


@pytest.mark.parametrize("width", WIDTHS)
def test_the_admin_home_lays_out_its_page_links_and_recent_actions(
    admin_page: Page, failed_decision: RoutingDecision, width: int
) -> None:
    admin_page.set_viewport_size({"width": width, "height": 900})

    admin_page.goto("/admin/")
    admin_page.wait_for_load_state("networkidle")  # its icons too
    snap(admin_page, f"admin-home-{width}")

    layout = admin_page.evaluate(ADMIN_LAYOUT)
    assert len(layout["linkTops"]) == 5
    if width == 1400:
        assert len(set(layout["linkTops"])) == 1, layout  # one row
        # Recent actions head their column, beside the modules rather than below them.
        assert layout["recentTop"] - layout["contentTop"] < 80, layout
    else:  # wrapped between links at most, never one link a line
        assert len(set(layout["linkTops"])) <= 2, layout


@pytest.mark.parametrize("path", ["/", "/analytics/decisions/", "/admin/", "/admin/login/"])
def test_every_page_has_an_icon(admin_page: Page, path: str) -> None:
    admin_page.goto(path)
    admin_page.wait_for_load_state("networkidle")  # the page fixture fails on a 404 or error

    icon = admin_page.locator("link[rel=icon]")
    expect(icon).to_have_count(1)
    href = icon.get_attribute("href")
    assert href
    answer = admin_page.request.get(href)
    assert answer.status == 200
    assert answer.headers["content-type"].startswith("image/svg+xml")


def test_favicon_ico_answers(live_url: str) -> None:
    """Browsers and tools ask for /favicon.ico without reading any page."""
    answer = httpx.get(f"{live_url}/favicon.ico")
    assert answer.status_code == 200
    assert answer.headers["content-type"].startswith("image/svg+xml")

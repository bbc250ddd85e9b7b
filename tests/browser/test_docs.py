"""The API docs pages and the admin login work in a real browser, offline, and the docs
lead back to the pages.

They also prove the harness: the ``page`` fixture fails a test on any console
error, failed request or request leaving the served 127.0.0.1 port.
"""

from __future__ import annotations

from urllib.parse import urlsplit

import pytest
from django.contrib.auth.models import User
from playwright.sync_api import Page, expect

from tests.browser.conftest import SUPERUSER_PASSWORD, log_in_with_form, snap

pytestmark = pytest.mark.browser


def test_redoc_renders_the_schema_offline(page: Page) -> None:
    page.goto("/api/v1/redoc")
    expect(page.locator("h1")).to_contain_text("Flywheel API")
    expect(page.get_by_text("/api/v1/query", exact=True)).to_be_visible()  # the schema loaded
    page.wait_for_load_state("networkidle")  # fonts and images have been asked for by now


def test_swagger_ui_renders_the_schema_offline(page: Page) -> None:
    page.goto("/api/v1/docs")
    expect(page.locator(".swagger-ui .info .title")).to_contain_text("Flywheel API")
    expect(page.locator(".opblock-summary-path", has_text="/api/v1/query").first).to_be_visible()
    page.wait_for_load_state("networkidle")


def test_admin_login_reaches_the_admin(page: Page, superuser: User) -> None:
    page.goto("/admin/login/")
    expect(page.locator("#login-form")).to_be_visible()

    log_in_with_form(page, superuser.username, SUPERUSER_PASSWORD)

    assert page.url.endswith("/admin/")
    expect(page.get_by_role("button", name="Log out")).to_be_visible()


@pytest.mark.parametrize("path", ["/api/v1/redoc", "/api/v1/docs"])
def test_the_api_docs_lead_back_to_the_pages(admin_page: Page, path: str) -> None:
    admin_page.goto(path)
    home = admin_page.locator("#flywheel-nav a", has_text="Flywheel")
    expect(home).to_be_visible()
    admin_page.wait_for_load_state("networkidle")
    snap(admin_page, "docs-nav" + path.replace("/", "-"))

    with admin_page.expect_navigation():
        home.click()

    assert urlsplit(admin_page.url).path == "/"
    expect(admin_page.locator("main h1")).to_be_visible()

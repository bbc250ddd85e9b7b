"""The API docs pages and the admin login work in a real browser, offline.

They also prove the harness: the ``page`` fixture fails a test on any console
error, failed request or request leaving the served 127.0.0.1 port.
"""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from playwright.sync_api import Page, expect

from tests.browser.conftest import SUPERUSER_PASSWORD, log_in_with_form

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

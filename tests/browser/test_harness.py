"""The harness itself: logging any user in, declared error statuses, the offline guard."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from django.contrib.auth.models import User
from playwright.sync_api import Browser, Page, expect

from tests.browser.conftest import PageErrors

pytestmark = pytest.mark.browser


def test_log_in_as_logs_a_non_staff_user_in(page: Page, log_in_as: Callable[[User], None]) -> None:
    log_in_as(User.objects.create_user("bob", password="irrelevant"))

    page.goto("/admin/")  # the admin sends a signed-in non-staff user to its login, saying so

    expect(page.get_by_text("You are authenticated as bob")).to_be_visible()


def test_a_declared_error_status_is_not_a_problem(page: Page, page_errors: PageErrors) -> None:
    page_errors.expect("/static/no-such-file.js", 404)

    response = page.goto("/static/no-such-file.js")

    assert response is not None
    assert response.status == 404


def test_a_request_outside_the_server_is_refused_and_recorded(
    browser: Browser, live_url: str
) -> None:
    errors = PageErrors(origin=live_url)
    context = browser.new_context(base_url=live_url)
    errors.watch(context)
    try:
        page = context.new_page()
        page.goto("/healthz")
        with page.expect_event("requestfailed"):  # the refused image
            page.set_content('<img src="https://example.com/logo.png">')
    finally:
        context.close()

    assert errors.found == ["outside request: GET https://example.com/logo.png"]

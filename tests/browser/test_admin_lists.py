"""The admin's busiest lists fit a 1400-pixel screen, long values included."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone
from playwright.sync_api import Page

from backends.models import Backend, BackendHealth
from chatflows.models import Flow
from flywheel.models import Tenant
from routing.install import defaults_load
from routing.models import IntentPattern, RoutingDecision, Session, Turn
from tests.browser.conftest import snap

pytestmark = [pytest.mark.browser]

LONG_ERROR = "Backend 'x' could not be reached (the connection failed). " * 4


@pytest.fixture
def crowded(db: None) -> None:
    """Rows with the longest values each list shows."""
    defaults_load()  # its regexes run to 600 characters
    tenant = Tenant.objects.create(name="A tenant with a rather long name", slug="long")
    for i in range(3):
        backend = Backend.objects.create(
            name=f"langflow-production-eu-west-{i}",
            kind="langflow",
            base_url=f"http://langflow-production-eu-west-{i}.internal.example.com:7860/api",
            api_key="sk-x",
            tenant=tenant,
        )
        BackendHealth.objects.create(
            backend=backend,
            healthy=False,
            latency_ms=12345,
            last_error=LONG_ERROR,
            cooldown_until=timezone.now() + timedelta(minutes=5),
        )
        Flow.objects.create(backend=backend, external_id=f"f{i}", name="echo")
        RoutingDecision.objects.create(
            tenant=tenant, question="Why? " * 100, outcome="fallback", backend=backend
        )
        session = Session.objects.create(tenant=tenant)
        Turn.objects.create(session=session, question="How? " * 100, answer="...")
    assert max(len(p.pattern) for p in IntentPattern.objects.all()) > 300


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    "path",
    [
        "/admin/backends/backend/",
        "/admin/routing/intentpattern/",
        "/admin/routing/routingdecision/",
        "/admin/routing/session/",
    ],
)
def test_the_list_fits_1400_pixels(admin_page: Page, crowded: None, path: str) -> None:
    admin_page.set_viewport_size({"width": 1400, "height": 900})

    admin_page.goto(path)
    admin_page.wait_for_load_state("networkidle")  # its icons too

    snap(admin_page, "admin-" + path.strip("/").replace("/", "-"))
    # The admin scrolls a wide table inside its box: the table must fit that box.
    table, box = admin_page.evaluate(
        "[document.querySelector('#result_list').scrollWidth,"
        " document.querySelector('.results').clientWidth]"
    )
    assert table <= box <= 1400
    assert admin_page.evaluate("document.documentElement.scrollWidth") <= 1400

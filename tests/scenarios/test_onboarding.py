"""A new backend answers at once: registering it probes its health and discovers its
flows, through every door (add_backend, REST, the admin), without beat or a worker.

The suite turns onboarding off (scripts/test.sh) so that no other test reaches a
backend it did not mock; here it is on, with Flowise's captured answers.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from io import StringIO

import httpx
import pytest
import respx
from django.core.management import call_command
from django.test import Client, override_settings
from rest_framework.test import APIClient

from backends import addresses
from backends.models import Backend
from chatflows.models import Flow
from flywheel.models import Tenant
from routing.install import defaults_load
from routing.selection.state import forget
from tests.captured import response

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("onboarding"),
]
URL = "http://fw.test"


@pytest.fixture
def onboarding(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    # DNS leaves the process: fw.test resolves to a public (documentation) address.
    monkeypatch.setattr(addresses, "resolve", lambda host, port: ["93.184.216.35"])
    with override_settings(ONBOARD_NEW_BACKENDS=True):
        defaults_load()
        yield


def _flowise_answers() -> respx.Route:
    respx.get(f"{URL}/api/v1/ping").mock(return_value=response("flowise", "ping"))
    pages = {
        "1": response("flowise", "chatflows_page1"),
        "2": response("flowise", "chatflows_page2"),
    }
    return respx.get(f"{URL}/api/v1/chatflows").mock(
        side_effect=lambda request: pages[request.url.params["page"]]
    )


def _add(*args: str) -> str:
    out = StringIO()
    call_command("add_backend", *args, stdout=out)
    return out.getvalue().rstrip()


@respx.mock
def test_add_backend_probes_and_discovers_at_once_and_says_what_it_found() -> None:
    _flowise_answers()

    printed = _add("--name", "fw", "--kind", "flowise", "--url", URL, "--api-key", "sk-SECRET")

    backend = Backend.objects.get()
    flows = Flow.objects.filter(backend=backend).count()
    first, health, found, *listed = printed.splitlines()
    assert first == f"{backend.pk}: Registered backend 'fw' (flowise at {URL})."
    assert re.fullmatch(r"  Health: answering \(\d+ ms\)\.", health), health
    assert found == (  # the captured echo flows serve no intent by their names
        f"  Flows: {flows} found ({flows} new), but none serves an intent yet: in the admin "
        "(Flows), tick 'generic' on one or add intents to its keywords, or run: "
        ".venv/bin/python manage.py set_flow FLOW --backend fw --generic"
    )
    assert flows > 0
    # Each flow found, by name, with what it serves: the names the next step asks for.
    names = Flow.objects.filter(backend=backend).order_by("name").values_list("name", flat=True)
    assert listed == [f"    - {name}: serves no intent yet" for name in names]
    assert backend.health.healthy
    assert "sk-SECRET" not in printed


@respx.mock
def test_a_tenants_backend_gets_the_next_command_with_its_tenant() -> None:
    """The printed step must work when pasted: a tenant's backend needs --tenant."""
    _flowise_answers()
    tenant = Tenant.objects.create(name="Acme", slug="acme")

    printed = _add("--name", "my fw", "--kind", "flowise", "--url", URL, "--tenant", "acme")

    assert printed.splitlines()[2].endswith(
        "manage.py set_flow FLOW --backend 'my fw' --tenant acme --generic"
    )
    assert Backend.objects.get().tenant == tenant


@respx.mock
def test_add_backend_says_why_an_unreachable_backend_cannot_answer_yet() -> None:
    respx.get(f"{URL}/api/v1/ping").mock(side_effect=httpx.ConnectError("refused"))
    chatflows = respx.get(f"{URL}/api/v1/chatflows")

    printed = _add("--name", "fw", "--kind", "flowise", "--url", URL)

    first, health, found = printed.splitlines()
    assert health == (
        "  Health: not answering: Backend 'fw' could not be reached (the connection failed). "
        "Beat keeps probing it."
    )
    assert found == "  Flows: not discovered: the health check failed"
    assert not chatflows.called
    assert first.startswith(f"{Backend.objects.get().pk}: Registered")  # registered all the same


@respx.mock
def test_a_backend_added_through_rest_answers_at_once(api_client: APIClient) -> None:
    _flowise_answers()
    respx.post(url__regex=rf"{URL}/api/v1/prediction/.*").mock(
        return_value=response("flowise", "prediction_chatflow")
    )

    created = api_client.post(
        "/api/v1/backends",
        {"name": "fw", "kind": "flowise", "base_url": URL, "api_key": "sk-SECRET"},
        format="json",
    )
    flow = Flow.objects.get(backend__name="fw", name="echo-chatflow")
    asked = api_client.post(
        "/api/v1/query", {"question": "hello there", "flow": flow.external_id}, format="json"
    )

    assert created.status_code == 201, created.content
    onboarding = created.json()["onboarding"]
    flows = Flow.objects.filter(backend__name="fw").count()
    assert onboarding["health"]["ok"] is True
    assert onboarding["flows"] == {
        "discovered": True,
        "total": flows,
        "added": flows,
        "routable": 0,
        "listed": [
            {"name": name, "deployed": True, "generic": False, "serves": []}
            for name in Flow.objects.order_by("name").values_list("name", flat=True)
        ],
    }
    assert created.json()["health"]["healthy"] is True
    assert "sk-SECRET" not in created.content.decode()
    assert asked.status_code == 200, asked.content
    assert asked.json()["routing"]["backend"] == "fw"


@respx.mock
def test_a_flow_marked_generic_after_onboarding_answers_any_question(
    api_client: APIClient,
) -> None:
    _flowise_answers()
    respx.post(url__regex=rf"{URL}/api/v1/prediction/.*").mock(
        return_value=response("flowise", "prediction_chatflow")
    )
    api_client.post(
        "/api/v1/backends", {"name": "fw", "kind": "flowise", "base_url": URL}, format="json"
    )
    before = api_client.post("/api/v1/query", {"question": "hello there"}, format="json")
    flow = Flow.objects.get(backend__name="fw", name="echo-chatflow")
    flow.is_generic = True
    flow.save()  # as in the admin: the flows snapshot is dropped
    forget()  # this process's routing memo, which lasts a second or so

    after = api_client.post("/api/v1/query", {"question": "hello there"}, format="json")

    assert before.json()["error"]["type"] == "NoMatchingFlow"
    assert "tick 'generic'" in before.json()["error"]["message"]
    assert after.status_code == 200, after.content
    assert after.json()["routing"]["flow"] == "echo-chatflow"


@respx.mock
def test_a_backend_added_in_the_admin_is_probed_and_discovered(admin_client: Client) -> None:
    _flowise_answers()

    page = admin_client.post(
        "/admin/backends/backend/add/",
        {
            "name": "fw",
            "kind": "flowise",
            "base_url": URL,
            "api_key": "sk-SECRET",
            "enabled": "on",
            "timeout_seconds": "30",
            "weight": "1",
            "health-TOTAL_FORMS": "0",
            "health-INITIAL_FORMS": "0",
        },
        follow=True,
    )

    flows = Flow.objects.filter(backend__name="fw").count()
    shown = [str(m) for m in page.context["messages"]]
    assert flows > 0
    assert any(
        re.fullmatch(
            rf"fw: Health: answering \(\d+ ms\)\. Flows: {flows} found \({flows} new\), but "
            r"none serves an intent yet: .*",
            m,
        )
        for m in shown
    ), shown

"""Every admin page loads; secrets are never rendered; unsafe patterns are refused."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from html import unescape
from typing import Any

import pytest
import respx
from django.contrib import admin
from django.contrib.messages.storage.cookie import CookieStorage
from django.db.models import Model
from django.test import Client
from django.urls import reverse
from django.utils import timezone
from django.utils.html import escape

from analytics.models import DecisionRollup
from backends.models import Backend, BackendHealth, HealthCheck
from chatflows.models import Flow
from flywheel.models import ApiKey, Tenant
from flywheel.services import api_key_authenticate, api_key_create
from routing.install import defaults_load
from routing.models import (
    Intent,
    IntentPattern,
    PerformanceRecord,
    RoutingDecision,
    RoutingPolicy,
    Session,
    Split,
    SplitArm,
    Turn,
)
from tests.captured import response

pytestmark = pytest.mark.django_db

SECRET = "sk-flowise-SECRET-do-not-render"


@pytest.fixture
def populated(tenant: Tenant, backend: Backend) -> dict[type, object]:
    """One row of every model, so that change pages and inlines render too."""
    defaults_load()
    flow = Flow.objects.create(backend=backend, external_id="f1", name="Echo", deployed=True)
    session = Session.objects.create(tenant=tenant)
    decision = RoutingDecision.objects.create(
        tenant=tenant, question="q", outcome="success", backend=backend, flow=flow
    )
    api_key, _ = api_key_create(tenant=tenant, name="admin test")
    split = Split.objects.create(intent=Intent.objects.get(slug="code-review"))
    return {
        Tenant: tenant,
        ApiKey: api_key,
        Backend: backend,
        BackendHealth: BackendHealth.objects.create(backend=backend, healthy=True),
        HealthCheck: HealthCheck.objects.create(backend=backend, ok=False, error="refused"),
        Flow: flow,
        Intent: Intent.objects.get(slug="code-review"),
        IntentPattern: IntentPattern.objects.first(),
        RoutingPolicy: RoutingPolicy.objects.get(),
        Split: split,
        SplitArm: SplitArm.objects.create(split=split, label="A", backend=backend, flow=flow),
        Session: session,
        Turn: Turn.objects.create(session=session, question="q", answer="a", backend=backend),
        RoutingDecision: decision,
        PerformanceRecord: PerformanceRecord.objects.create(
            backend=backend, flow=flow, intent="general", latency_ms=5, success=True
        ),
        DecisionRollup: DecisionRollup.objects.create(
            bucket_start=datetime(2026, 1, 1, tzinfo=UTC), tenant=tenant, backend=backend
        ),
    }


def _registered_models() -> list[type[Model]]:
    return [m for m in admin.site._registry if m._meta.app_label != "auth"]


def _url(model: type[Model], view: str, *args: object) -> str:
    return reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_{view}", args=args)


def test_every_project_model_has_an_admin() -> None:
    ours = {"flywheel", "backends", "chatflows", "routing", "analytics"}
    from django.apps import apps

    models = {m for m in apps.get_models() if m._meta.app_label in ours}
    assert models <= set(admin.site._registry)


def test_every_changelist_add_and_change_page_loads(admin_client: Client, populated) -> None:
    for model in _registered_models():
        changelist = admin_client.get(_url(model, "changelist"), follow=True)
        assert changelist.status_code == 200, model

        can_add = admin.site._registry[model].has_add_permission(changelist.wsgi_request)
        add = admin_client.get(_url(model, "add"))
        assert add.status_code == (200 if can_add else 403), model

        if model in populated:
            change = admin_client.get(_url(model, "change", populated[model].pk))
            assert change.status_code == 200, model


def test_changelist_filters_and_search_answer(admin_client: Client, populated) -> None:
    for model in _registered_models():
        response = admin_client.get(_url(model, "changelist"), {"q": "echo"})
        assert response.status_code == 200, model


def test_no_admin_page_renders_a_backend_api_key(admin_client: Client, populated) -> None:
    backend = populated[Backend]
    pages = [
        _url(Backend, "changelist"),
        _url(Backend, "change", backend.pk),
        _url(BackendHealth, "changelist"),
        _url(Flow, "change", populated[Flow].pk),
        _url(RoutingDecision, "change", populated[RoutingDecision].pk),
    ]
    for page in pages:
        html = admin_client.get(page).content.decode()
        assert SECRET not in html, page
        assert "SECRET" not in html, page


def test_the_backend_page_says_whether_a_key_is_set(admin_client: Client, populated) -> None:
    html = admin_client.get(_url(Backend, "changelist")).content.decode()

    assert "set (hidden)" in html


def _backend_form(backend: Backend, **changes: object) -> dict[str, object]:
    data: dict[str, object] = {
        "name": backend.name,
        "kind": backend.kind,
        "base_url": backend.base_url,
        "api_key": "",
        "enabled": "on",
        "timeout_seconds": backend.timeout_seconds,
        "weight": backend.weight,
        "tenant": "",
        "health-TOTAL_FORMS": "0",
        "health-INITIAL_FORMS": "0",
        "health-MIN_NUM_FORMS": "0",
        "health-MAX_NUM_FORMS": "1",
    }
    data.update(changes)
    return data


def test_a_blank_key_field_keeps_the_stored_key(admin_client: Client, backend: Backend) -> None:
    response = admin_client.post(
        _url(Backend, "change", backend.pk), _backend_form(backend, name="renamed")
    )

    assert response.status_code == 302
    backend.refresh_from_db()
    assert (backend.name, backend.api_key) == ("renamed", SECRET)


def test_a_new_key_replaces_the_stored_key(admin_client: Client, backend: Backend) -> None:
    admin_client.post(_url(Backend, "change", backend.pk), _backend_form(backend, api_key="new"))

    backend.refresh_from_db()
    assert backend.api_key == "new"


def test_the_stored_key_can_be_removed(admin_client: Client, backend: Backend) -> None:
    admin_client.post(
        _url(Backend, "change", backend.pk), _backend_form(backend, clear_api_key="on")
    )

    backend.refresh_from_db()
    assert backend.api_key == ""


def test_an_unsafe_pattern_is_refused_with_a_message(admin_client: Client, db) -> None:
    intent = Intent.objects.create(slug="x", name="X")

    response = admin_client.post(
        _url(IntentPattern, "add"),
        {"intent": intent.pk, "kind": "regex", "pattern": "(a+)+$", "weight": 1, "enabled": "on"},
    )

    assert response.status_code == 200
    assert "backtrack catastrophically" in response.content.decode()
    assert not IntentPattern.objects.exists()


def _messages_in(response: Any) -> list[str]:
    """The messages a response leaves in the messages cookie (signed, so readable)."""
    if "messages" not in response.cookies:
        return []
    storage: Any = CookieStorage(response.wsgi_request)
    return [str(m) for m in storage._decode(response.cookies["messages"].value) or []]


def test_a_new_api_key_is_shown_once_on_the_page_and_never_in_a_cookie(
    admin_client: Client, tenant: Tenant
) -> None:
    response = admin_client.post(
        _url(ApiKey, "add"), {"tenant": tenant.pk, "name": "from admin", "rate_limit": ""}
    )

    assert response.status_code == 200
    html = response.content.decode()
    (raw_key,) = set(re.findall(r"fw_[0-9a-f]{8}_[\w-]{20,}", html))
    assert html.count(raw_key) == 1
    assert api_key_authenticate(raw_key=raw_key).name == "from admin"
    assert all(raw_key not in morsel.value for morsel in response.cookies.values())
    assert not any(raw_key in message for message in _messages_in(response))
    assert raw_key not in str(dict(admin_client.session))
    assert "no-store" in response["Cache-Control"]
    later = admin_client.get(_url(ApiKey, "change", ApiKey.objects.get().pk)).content.decode()
    assert raw_key not in later
    assert ApiKey.objects.get().hashed_key not in later


def test_a_key_is_created_with_its_own_rate_limit(admin_client: Client, tenant: Tenant) -> None:
    response = admin_client.post(
        _url(ApiKey, "add"), {"tenant": tenant.pk, "name": "busy", "rate_limit": "90/Minutes"}
    )

    assert response.status_code == 200
    assert ApiKey.objects.get().rate_limit == "90/minute"


def test_a_key_rate_limit_is_edited_in_the_admin(admin_client: Client, tenant: Tenant) -> None:
    api_key, raw_key = api_key_create(tenant=tenant, name="k")
    api_key_authenticate(raw_key=raw_key)  # remembered in the cache

    response = admin_client.post(_url(ApiKey, "change", api_key.pk), {"rate_limit": " 10/second"})

    assert response.status_code == 302
    assert ApiKey.objects.get().rate_limit == "10/second"
    assert api_key_authenticate(raw_key=raw_key).rate_limit == "10/second"  # not the cached one


@pytest.mark.parametrize("rate_limit", ["lots", "10/fortnight", "-1/minute"])
def test_a_bad_rate_limit_is_refused_on_the_form(
    admin_client: Client, tenant: Tenant, rate_limit: str
) -> None:
    api_key, _ = api_key_create(tenant=tenant, name="k", rate_limit="5/minute")

    response = admin_client.post(_url(ApiKey, "change", api_key.pk), {"rate_limit": rate_limit})

    assert response.status_code == 200
    assert "Write a rate such as" in response.content.decode()
    assert ApiKey.objects.get().rate_limit == "5/minute"


def test_the_revoke_action_revokes_keys(admin_client: Client, tenant: Tenant) -> None:
    api_key, _ = api_key_create(tenant=tenant, name="old")

    admin_client.post(
        _url(ApiKey, "changelist"), {"action": "revoke", "_selected_action": [api_key.pk]}
    )

    api_key.refresh_from_db()
    assert api_key.revoked_at is not None


def test_editing_flow_keywords_marks_them_as_hand_edited(
    admin_client: Client, backend: Backend
) -> None:
    flow = Flow.objects.create(backend=backend, external_id="f", name="Echo", intent_keywords=[])

    response = admin_client.post(
        _url(Flow, "change", flow.pk),
        {
            "name": "Echo",
            "flow_type": "",
            "description": "",
            "endpoint_name": "",
            "intent_keywords": " Code-Review, summarize,,code-review ",
            "scope": "any",
        },
    )

    assert response.status_code == 302
    flow.refresh_from_db()
    assert flow.intent_keywords == ["code-review", "summarize"]
    assert flow.keywords_edited is True
    page = admin_client.get(_url(Flow, "change", flow.pk)).content.decode()
    assert 'value="code-review, summarize"' in page  # one line, not JSON


def test_decisions_cannot_be_edited_or_deleted(admin_client: Client, populated) -> None:
    decision = populated[RoutingDecision]

    response = admin_client.post(_url(RoutingDecision, "delete", decision.pk), {"post": "yes"})

    assert response.status_code == 403
    assert RoutingDecision.objects.filter(pk=decision.pk).exists()


@respx.mock
@pytest.mark.django_db(transaction=True)
def test_the_health_action_probes_the_selected_backends(
    admin_client: Client, backend: Backend
) -> None:
    respx.get(f"{backend.base_url}/api/v1/ping").mock(return_value=response("flowise", "ping"))

    result = admin_client.post(
        _url(Backend, "changelist"),
        {"action": "check_health_now", "_selected_action": [backend.pk]},
        follow=True,
    )

    shown = [str(m) for m in result.context["messages"]]
    assert f"{backend.name}: healthy" in shown
    assert HealthCheck.objects.filter(backend=backend, ok=True).exists()


@respx.mock
@pytest.mark.django_db(transaction=True)
def test_the_discovery_action_discovers_the_selected_backends(
    admin_client: Client, backend: Backend
) -> None:
    pages = {
        "1": response("flowise", "chatflows_page1"),
        "2": response("flowise", "chatflows_page2"),
    }
    respx.get(f"{backend.base_url}/api/v1/chatflows").mock(
        side_effect=lambda request: pages[request.url.params["page"]]
    )
    changelist = _url(Backend, "changelist")

    offered = admin_client.get(changelist).content.decode()
    result = admin_client.post(
        changelist, {"action": "discover_flows_now", "_selected_action": [backend.pk]}, follow=True
    )

    # chatflows' admin adds the action to backends' own: both are offered.
    assert 'value="check_health_now"' in offered
    assert 'value="discover_flows_now"' in offered
    shown = [str(m) for m in result.context["messages"]]
    assert f"{backend.name}: 2 added, 0 updated, 0 removed" in shown
    assert Flow.objects.filter(backend=backend).count() == 2


def test_what_a_flow_is_on_its_backend_is_not_edited_in_the_admin(
    admin_client: Client, backend: Backend
) -> None:
    flow = Flow.objects.create(backend=backend, external_id="f", name="Echo", deployed=False)

    admin_client.post(
        _url(Flow, "change", flow.pk),
        {"name": "Renamed", "deployed": "on", "intent_keywords": "[]", "scope": "any"},
    )

    flow.refresh_from_db()
    assert (flow.name, flow.deployed) == ("Echo", False)  # changed on the backend, not here


@respx.mock
@pytest.mark.django_db(transaction=True)
def test_the_flow_actions_deploy_and_delete_on_the_backend_first(
    admin_client: Client, backend: Backend
) -> None:
    record = response("flowise", "chatflow_get").json()
    flow = Flow.objects.create(
        backend=backend, external_id=record["id"], name=record["name"], deployed=False
    )
    deployed = respx.put(f"{backend.base_url}/api/v1/chatflows/{record['id']}").mock(
        return_value=response("flowise", "chatflow_get")  # the record, deployed
    )
    deleted = respx.delete(f"{backend.base_url}/api/v1/chatflows/{record['id']}").mock(
        return_value=response("flowise", "chatflow_delete_unknown")  # gone already
    )
    changelist = _url(Flow, "changelist")

    admin_client.post(changelist, {"action": "deploy_on_backend", "_selected_action": [flow.pk]})
    flow.refresh_from_db()
    deployed_after = flow.deployed
    result = admin_client.post(
        changelist, {"action": "delete_on_backend", "_selected_action": [flow.pk]}, follow=True
    )
    flow.refresh_from_db()

    assert deployed.call_count == 1
    assert deployed_after is True
    assert deleted.call_count == 1
    shown = [str(m) for m in result.context["messages"]]
    assert any("not found in the database" in m for m in shown), shown
    assert flow.removed_at is not None


# --- lists that fit the screen and say what matters --------------------------------------


def test_the_backends_list_shows_latency_cooldown_last_error_and_flows(
    admin_client: Client, backend: Backend
) -> None:
    BackendHealth.objects.create(
        backend=backend,
        healthy=False,
        latency_ms=42.4,
        last_error="Backend 'fw' could not be reached (the connection failed). " * 3,
        cooldown_until=timezone.now() + timedelta(minutes=5),
    )
    Flow.objects.create(backend=backend, external_id="a", name="A")
    Flow.objects.create(backend=backend, external_id="b", name="B")
    Flow.objects.create(backend=backend, external_id="c", name="C", removed_at=timezone.now())

    page = admin_client.get(_url(Backend, "changelist")).content.decode()

    assert "42 ms" in page
    assert '<td class="field-flows">2</td>' in page
    assert re.search(r'<td class="field-cooldown">\d\d:\d\d:\d\d</td>', page)
    assert "could not be reached (the connection failed). Backend" in page  # the tooltip
    assert '<td class="field-last_error"><span title=' in page  # cut in the column


def test_a_long_regex_is_cut_in_the_list_and_whole_on_hover(admin_client: Client, db) -> None:
    defaults_load()
    longest = max(IntentPattern.objects.all(), key=lambda p: len(p.pattern))
    assert len(longest.pattern) > 80

    page = admin_client.get(_url(IntentPattern, "changelist") + "?all=").content.decode()

    shown = re.search(rf'<span title="{re.escape(escape(longest.pattern))}">(.*?)</span>', page)
    assert shown is not None
    assert shown.group(1).endswith("…")
    assert len(unescape(shown.group(1))) == 80


def test_the_decisions_list_shows_the_question_outcome_and_time(
    admin_client: Client, tenant: Tenant
) -> None:
    RoutingDecision.objects.create(
        tenant=tenant, question="How do I rotate the keys?", outcome="fallback", total_ms=1234.5
    )

    page = admin_client.get(_url(RoutingDecision, "changelist")).content.decode()

    assert "How do I rotate the keys?" in page
    assert '<td class="field-outcome">Answered after a fallback</td>' in page
    assert '<td class="field-total_time">1234 ms</td>' in page


def test_the_routing_policy_opens_directly(admin_client: Client, db) -> None:
    defaults_load()

    response = admin_client.get(_url(RoutingPolicy, "changelist"))

    assert response.status_code == 302
    assert response["Location"] == _url(RoutingPolicy, "change", RoutingPolicy.objects.get().pk)


def test_the_sessions_list_shows_the_first_question_and_the_turns(
    admin_client: Client, tenant: Tenant
) -> None:
    session = Session.objects.create(tenant=tenant)
    for question in ("What is a vector index?", "and how big can it get?"):
        Turn.objects.create(session=session, question=question, answer="...")

    page = admin_client.get(_url(Session, "changelist")).content.decode()

    assert "What is a vector index?" in page
    assert "and how big can it get?" not in page
    assert '<td class="field-turn_count">2</td>' in page


def test_unused_beat_schedules_are_not_in_the_admin() -> None:
    from django_celery_beat.models import ClockedSchedule, IntervalSchedule, SolarSchedule

    assert not admin.site.is_registered(ClockedSchedule)
    assert not admin.site.is_registered(SolarSchedule)
    assert admin.site.is_registered(IntervalSchedule)

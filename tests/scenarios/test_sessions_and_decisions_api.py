"""Reading back over REST: the caller's sessions (GET /api/v1/sessions) and each
decision's trace_url (GET /api/v1/decisions)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import Client, override_settings
from django.utils import timezone
from rest_framework.test import APIClient

from flywheel.models import Tenant
from flywheel.services import api_key_create
from routing.models import RoutingDecision, Session, Turn

pytestmark = pytest.mark.django_db


def _session(tenant: Tenant, *questions: str, active_minutes_ago: int = 0) -> Session:
    session = Session.objects.create(tenant=tenant)
    for question in questions:
        Turn.objects.create(session=session, question=question, answer=f"About {question}")
    # Last active when its last turn was written: set it, rather than wait between them.
    active = timezone.now() - timedelta(minutes=active_minutes_ago)
    Session.objects.filter(pk=session.pk).update(updated_at=active)
    return session


def _client_of(tenant: Tenant) -> APIClient:
    _, raw_key = api_key_create(tenant=tenant, name="reader")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw_key}")
    return client


# --- GET /api/v1/sessions ---------------------------------------------------------------


def test_sessions_are_listed_most_recently_active_first(
    tenant: Tenant, api_client: APIClient
) -> None:
    older = _session(tenant, "Review my PR", active_minutes_ago=30)
    newest = _session(tenant, "Summarize the design doc", active_minutes_ago=1)
    middle = _session(tenant, "What is a flow?", active_minutes_ago=10)

    result = api_client.get("/api/v1/sessions")

    assert result.status_code == 200, result.content
    assert [s["id"] for s in result.json()] == [str(newest.pk), str(middle.pk), str(older.pk)]


def test_each_session_shows_its_first_question_last_answer_and_number_of_turns(
    tenant: Tenant, api_client: APIClient
) -> None:
    session = _session(tenant, "Review my PR", "And the tests?", "Thanks, and the docs?")

    [shown] = api_client.get("/api/v1/sessions").json()

    assert shown["first_question"] == "Review my PR"
    assert shown["turn_count"] == 3
    assert shown["preview"] == "About Thanks, and the docs?"  # the start of the last answer
    assert shown["created_at"].startswith(str(session.created_at.date()))
    assert set(shown) == {
        "id",
        "created_at",
        "updated_at",
        "first_question",
        "preview",
        "turn_count",
    }


def test_another_tenants_sessions_never_show(tenant: Tenant, api_client: APIClient) -> None:
    mine = _session(tenant, "Mine", active_minutes_ago=5)
    other = Tenant.objects.create(name="Other", slug="other")
    theirs = _session(other, "Theirs, and newer")

    seen_by_me = api_client.get("/api/v1/sessions").json()
    seen_by_them = _client_of(other).get("/api/v1/sessions").json()

    assert [s["id"] for s in seen_by_me] == [str(mine.pk)]
    assert [s["id"] for s in seen_by_them] == [str(theirs.pk)]
    assert "Theirs" not in str(seen_by_me)


def test_a_session_that_never_got_an_answer_is_left_out(
    tenant: Tenant, api_client: APIClient
) -> None:
    _session(tenant)  # a refused query still records its session, without a turn

    assert api_client.get("/api/v1/sessions").json() == []


def test_limit_keeps_the_most_recently_active(tenant: Tenant, api_client: APIClient) -> None:
    _session(tenant, "Older", active_minutes_ago=9)
    newest = _session(tenant, "Newer", active_minutes_ago=1)

    result = api_client.get("/api/v1/sessions", {"limit": "1"})

    assert [s["id"] for s in result.json()] == [str(newest.pk)]


@pytest.mark.parametrize("limit", ["0", "501", "", "-1", "1.5", "ten", "\u0663", "99999999999"])
def test_a_limit_that_is_not_from_1_to_500_is_refused_naming_it(
    api_client: APIClient, limit: str
) -> None:
    result = api_client.get("/api/v1/sessions", {"limit": limit})

    assert result.status_code == 400
    error = result.json()["error"]
    assert error["type"] == "ValidationError"
    assert error["details"]["fields"] == {"limit": "Must be an integer from 1 to 500."}


def test_sessions_need_an_api_key(tenant: Tenant) -> None:
    _session(tenant, "Review my PR")

    result = APIClient().get("/api/v1/sessions")

    assert result.status_code == 401
    assert "Review my PR" not in result.content.decode()


# --- trace_url on each decision -----------------------------------------------------------


@pytest.fixture
def decision(tenant: Tenant) -> RoutingDecision:
    return RoutingDecision.objects.create(
        tenant=tenant, question="Please review my pull request", outcome="success"
    )


def test_each_decision_links_its_trace_page(
    decision: RoutingDecision, api_client: APIClient, admin_client: Client
) -> None:
    listed = api_client.get("/api/v1/decisions").json()["results"]
    one = api_client.get(f"/api/v1/decisions/{decision.request_id}").json()

    expected = f"http://testserver/decisions/{decision.request_id}"
    assert [d["trace_url"] for d in listed] == [expected]
    assert one["trace_url"] == expected
    page = admin_client.get(expected.removeprefix("http://testserver"))
    assert page.status_code == 200
    assert "Please review my pull request" in page.content.decode()


@override_settings(PUBLIC_URL="https://flywheel.example")
def test_the_trace_url_is_under_the_public_url_when_one_is_set(
    decision: RoutingDecision, api_client: APIClient
) -> None:
    one = api_client.get(f"/api/v1/decisions/{decision.request_id}").json()

    assert one["trace_url"] == f"https://flywheel.example/decisions/{decision.request_id}"

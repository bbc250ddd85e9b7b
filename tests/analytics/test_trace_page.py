"""The decision trace page: staff who may view routing decisions see every tenant's,
members of a tenant their own (tests/analytics/test_pages.py), and no one else; and
what it reads of a decision, whichever shape its row keeps, whatever was deleted since."""

from __future__ import annotations

import html
import re

import pytest
from django.contrib.auth.models import Permission, User
from django.test import Client

from backends.models import Backend
from chatflows.models import Flow
from flywheel.models import Tenant
from routing.models import RoutingDecision

pytestmark = pytest.mark.django_db

QUESTION = "Please review my pull request"


@pytest.fixture
def path(tenant: Tenant) -> str:
    decision = RoutingDecision.objects.create(tenant=tenant, question=QUESTION, outcome="success")
    return f"/decisions/{decision.request_id}"


def _client_for(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


def _staff(*permissions: str) -> User:
    user = User.objects.create_user("operator", password="x", is_staff=True)
    for codename in permissions:
        user.user_permissions.add(Permission.objects.get(codename=codename))
    return user


def test_staff_without_the_view_permission_get_403(path: str) -> None:
    response = _client_for(_staff("view_backend")).get(path)

    assert response.status_code == 403
    assert QUESTION not in response.content.decode()


def test_staff_with_the_view_permission_see_the_decision(path: str) -> None:
    response = _client_for(_staff("view_routingdecision")).get(path)

    assert response.status_code == 200
    assert QUESTION in response.content.decode()


def test_a_superuser_sees_the_decision(path: str, admin_client: Client) -> None:
    response = admin_client.get(path)

    assert response.status_code == 200
    assert QUESTION in response.content.decode()


def test_anonymous_visitors_are_sent_to_log_in(path: str) -> None:
    response = Client().get(path)

    assert response.status_code == 302
    assert response["Location"].startswith("/admin/login/")
    assert f"next={path}" in response["Location"]


def test_a_person_who_is_not_staff_and_acts_for_no_tenant_is_refused(path: str) -> None:
    user = User.objects.create_user("someone", password="x")
    user.user_permissions.add(Permission.objects.get(codename="view_routingdecision"))

    response = _client_for(user).get(path)

    assert response.status_code == 403
    assert QUESTION not in response.content.decode()


def test_staff_without_the_permission_get_403_for_an_unknown_decision_too() -> None:
    response = _client_for(_staff()).get("/decisions/00000000-0000-0000-0000-000000000000")

    assert response.status_code == 403


# --- what it reads: rows of either shape, and what was deleted since -----------------


def _dd(page: str, dd_id: str) -> str:
    """The text of the page's ``<dd id=...>``, its tags left out."""
    found = re.search(rf'<dd id="{dd_id}">(.*?)</dd>', page, re.DOTALL)
    assert found is not None, f"no {dd_id} on the page"
    return " ".join(re.sub(r"<[^>]+>", " ", html.unescape(found.group(1))).split())


def _table(page: str, table_id: str) -> list[list[str]]:
    """The cells of the page's ``<table id=...>``, row by row, the header row left out."""
    found = re.search(rf'<table id="{table_id}".*?</table>', page, re.DOTALL)
    assert found is not None, f"no {table_id} on the page"
    rows = re.findall(r"<tr>(.*?)</tr>", found.group(0), re.DOTALL)[1:]
    return [
        [" ".join(re.sub(r"<[^>]+>", " ", html.unescape(c)).split()) for c in cells]
        for cells in (re.findall(r"<td[^>]*>(.*?)</td>", row, re.DOTALL) for row in rows)
    ]


def test_the_trace_of_a_decision_whose_flow_was_deleted_names_it_so(
    tenant: Tenant, backend: Backend, admin_client: Client
) -> None:
    flow = Flow.objects.create(backend=backend, external_id="ext-7", name="Reviewer")
    decision = RoutingDecision.objects.create(
        tenant=tenant,
        question=QUESTION,
        outcome="success",
        intent="code-review",
        backend=backend,
        flow=flow,
        evidence={"intent": ["pull request"], "intent_summary": "matched 'pull request'"},
        candidates=[[backend.pk, flow.pk, 0.6, 0.97, 0.03, 812.0, 140.0, 0.83, False]],
        fallback_chain=[[backend.pk, flow.pk, True, 812.4]],
    )
    deleted = f"deleted flow #{flow.pk}"
    flow.delete()

    page = admin_client.get(f"/decisions/{decision.request_id}").content.decode()

    assert _dd(page, "answered-by").startswith(f"flowise-main / {deleted} ")
    assert _dd(page, "why") == (
        f"flowise-main / {deleted}: 97 % of 140 recent attempts answered (±3 %), 812 ms "
        "typical; chosen for the expected 830 ms to an answer."
    )
    assert _table(page, "chain") == [["1", "flowise-main", deleted, "answered", "812.4", ""]]
    assert _table(page, "candidates") == [
        ["flowise-main", deleted, "97 % ±3", "140", "812", "0.83", "0.600", "no"]
    ]


def test_the_trace_of_a_decision_kept_in_the_earlier_shape_reads_as_it_did(
    tenant: Tenant, admin_client: Client
) -> None:
    decision = RoutingDecision.objects.create(
        tenant=tenant,
        question=QUESTION,
        outcome="fallback",
        intent="code-review",
        evidence={
            "intent": [r"\bpull request\b"],
            "intent_summary": "matched 'pull request' (code-review rule 1)",
            "why": "fw / Reviewer: score 0.80.",
        },
        candidates=[
            {"backend": "fw", "kind": "flowise", "flow": "Reviewer", "score": 0.8},
            {"backend": "lf", "kind": "langflow", "flow": "Echo", "score": 0.7},
        ],
        fallback_chain=[
            {
                "backend": "fw",
                "flow": "Reviewer",
                "ok": False,
                "latency_ms": 5.0,
                "error_type": "UnexpectedError",
                "error": "boom",
            },
            {
                "backend": "lf",
                "flow": "Echo",
                "ok": True,
                "latency_ms": 3.67,
                "error_type": "",
                "error": "",
            },
        ],
    )

    page = admin_client.get(f"/decisions/{decision.request_id}").content.decode()

    assert _dd(page, "intent").endswith(
        r"matched 'pull request' (code-review rule 1) The rules behind it \bpull request\b"
    )
    assert _dd(page, "answered-by").startswith("lf / Echo ")  # its backend deleted since
    assert _dd(page, "why") == "fw / Reviewer: score 0.80."
    assert [row[1:4] for row in _table(page, "chain")] == [
        ["fw", "Reviewer", "failed"],
        ["lf", "Echo", "answered"],
    ]
    assert [row[:2] for row in _table(page, "candidates")] == [["fw", "Reviewer"], ["lf", "Echo"]]

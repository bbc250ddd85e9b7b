"""The arms of an A/B split compared: on the analytics page, in REST, from the decisions."""

from __future__ import annotations

import random
from typing import Any

import httpx
import pytest
from asgiref.sync import async_to_sync
from django.contrib.auth.models import User
from django.test import Client
from rest_framework.test import APIClient

from analytics.splits import split_arms
from flywheel.errors import ValidationError
from flywheel.models import Membership, Tenant
from flywheel.services import api_key_create
from routing.answering.query_input import query_request
from routing.answering.service import answer_question
from routing.models import Intent, RoutingDecision, Split, SplitArm
from routing.recording.writer import drain
from routing.selection import planning
from tests.routing_world import World, refresh

pytestmark = pytest.mark.django_db(transaction=True)

REVIEW = "Please review my pull request"


@pytest.fixture(autouse=True)
def _reproducible_draws(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(planning, "_draws", random.Random(11))  # noqa: S311 - a test's draws


@pytest.fixture
def acme(world: World) -> Tenant:
    """Code review split evenly between fw (A) and lf (B); lf fails, so B's questions are
    answered by fw after a fallback. Twenty questions asked."""
    split = Split.objects.create(intent=Intent.objects.get(slug="code-review"), note="lf vs fw")
    SplitArm.objects.create(split=split, label="A", backend=world.fw, weight=1)
    SplitArm.objects.create(split=split, label="B", backend=world.lf, weight=1)
    world.lf_route.mock(return_value=httpx.Response(500, json={"message": "boom"}))
    refresh()
    tenant = Tenant.objects.create(name="Acme", slug="acme")
    for _ in range(20):
        async_to_sync(answer_question)(query_request({"question": REVIEW}), tenant=tenant)
    drain()
    return tenant


def _arms(found: dict[str, Any]) -> dict[str, dict[str, Any]]:
    (intent,) = found["intents"]
    assert intent["intent"] == "code-review"
    return {a["arm"]: a for a in intent["arms"]}


def test_each_arm_shows_how_its_questions_were_answered(acme: Tenant) -> None:
    found = split_arms(tenant=acme)

    arms = _arms(found)
    assert sorted(arms) == ["A", "B"]
    a, b = arms["A"], arms["B"]
    assert (a["backend"], a["flow"], b["backend"], b["flow"]) == ("fw", "reviewer", "lf", "echo")
    assert a["questions"] + b["questions"] == found["intents"][0]["questions"] == 20
    assert a["questions"] >= 3 and b["questions"] >= 3  # noqa: PT018 - both drawn, 1:1
    assert a["share"] + b["share"] == pytest.approx(1.0)
    assert (a["first_answered"], a["answered"]) == (1.0, 1.0)
    assert (b["first_answered"], b["answered"]) == (0.0, 1.0)  # lf failed, fw answered
    assert a["median_ms"] is not None
    assert b["p90_ms"] >= b["median_ms"]


def test_another_tenant_sees_none_of_them(acme: Tenant) -> None:
    other = Tenant.objects.create(name="Globex", slug="globex")

    assert split_arms(tenant=other)["intents"] == []
    assert split_arms(tenant=acme, intent="general")["intents"] == []


def test_a_bad_intent_filter_is_refused(acme: Tenant) -> None:
    with pytest.raises(ValidationError):
        split_arms(tenant=acme, intent="not an intent!")


def test_rest_answers_the_same_comparison(acme: Tenant) -> None:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {api_key_create(tenant=acme, name='r')[1]}")

    response = client.get("/api/v1/analytics/splits")

    assert response.status_code == 200
    assert _arms(response.json()) == _arms(split_arms(tenant=acme))


def test_the_analytics_page_compares_the_arms(acme: Tenant) -> None:
    user = User.objects.create_user("alice", password="x")
    Membership.objects.create(user=user, tenant=acme)
    client = Client()
    client.force_login(user)

    page = client.get("/analytics/").content.decode()

    assert "<h2>A/B splits</h2>" in page
    assert "code-review: 20 questions sent first to an arm" in page
    assert "lf / echo" in page
    assert "fw / reviewer" in page


def test_decisions_kept_in_the_earlier_shape_count_with_their_arm(acme: Tenant) -> None:
    before = _arms(split_arms(tenant=acme))["A"]["questions"]
    RoutingDecision.objects.create(
        tenant=acme,
        question=REVIEW,
        intent="code-review",
        outcome="success",
        evidence={"arm": "A"},
        candidates=[{"backend": "fw", "flow": "reviewer", "score": 0.8, "arm": "A"}],
    )

    arms = _arms(split_arms(tenant=acme))

    assert sorted(arms) == ["A", "B"]  # one arm A, whichever shape its decisions keep
    assert (arms["A"]["backend"], arms["A"]["flow"]) == ("fw", "reviewer")
    assert arms["A"]["questions"] == before + 1

"""One-shot questions: no session is kept for a question asked without a session id
unless it is continued, under the id its answer gave (its request id)."""

from __future__ import annotations

import uuid
from typing import Any

import httpx
import pytest
from asgiref.sync import async_to_sync
from django.db import transaction

from analytics.access import Scope
from analytics.visualize import session_visualization
from flywheel.cache import shared_cache
from flywheel.errors import NotFoundError
from flywheel.models import Tenant
from routing.answering.query_input import query_request
from routing.answering.service import answer_question, stream_answer
from routing.answering.sessions import SESSION_KEY, session_known
from routing.errors import AllBackendsFailedError
from routing.models import RoutingDecision, Session, Turn
from routing.recording import store
from routing.recording.answers import _answer_key
from routing.recording.batch_sql import decisions_insert
from routing.recording.decision import DecisionData
from routing.recording.writer import drain
from tests.routing_world import FW_ANSWER, World

pytestmark = pytest.mark.django_db(transaction=True)

REVIEW = "Please review my pull request"


def ask(tenant: Tenant, **fields: Any) -> dict[str, Any]:
    try:
        return async_to_sync(answer_question)(query_request(fields), tenant=tenant)
    finally:
        drain()


def test_a_one_shot_question_keeps_no_session_turn_or_cached_conversation(
    world: World, tenant: Tenant
) -> None:
    body = ask(tenant, question=REVIEW)

    assert body["session_id"] == body["request_id"]
    assert body["session_url"] == f"/v/{body['request_id']}/"
    decision = RoutingDecision.objects.get()
    assert (decision.outcome, decision.session_id) == ("success", None)
    assert not Session.objects.exists()
    assert not Turn.objects.exists()
    assert shared_cache().get(SESSION_KEY.format(id=body["session_id"])) is None


def test_continued_it_starts_the_session_with_it_as_the_first_turn(
    world: World, tenant: Tenant
) -> None:
    first = ask(tenant, question=REVIEW)
    second = ask(tenant, question="and refactor it too", session_id=first["session_id"])
    third = ask(tenant, question="and the tests?", session_id=first["session_id"])

    assert second["session_id"] == third["session_id"] == first["request_id"]
    assert second["routing"]["intent"] == "code-review"  # the first question's, by context
    session = Session.objects.get()
    assert str(session.pk) == first["request_id"]
    turns = list(session.turns.order_by("created_at", "id"))
    assert [(t.question, t.answer) for t in turns] == [
        (REVIEW, FW_ANSWER),
        ("and refactor it too", FW_ANSWER),
        ("and the tests?", FW_ANSWER),
    ]
    opening = RoutingDecision.objects.get(request_id=first["request_id"])
    assert turns[0].decision_id == opening.pk
    assert turns[0].created_at == opening.created_at  # dated when it was asked
    assert opening.session_id is None  # its row is as it was written
    assert Turn.objects.count() == 3  # the third question found the session: no second opening


def test_its_answer_gone_from_the_cache_it_is_continued_with_its_question(
    world: World, tenant: Tenant
) -> None:
    first = ask(tenant, question=REVIEW)
    shared_cache().delete(_answer_key(tenant.pk, "code-review", REVIEW))

    ask(tenant, question="and refactor it too", session_id=first["session_id"])

    opening = Turn.objects.order_by("created_at", "id").first()
    assert opening is not None
    assert (opening.question, opening.answer) == (REVIEW, "")


def test_only_an_answered_one_shot_of_the_tenant_is_continued(world: World, tenant: Tenant) -> None:
    other = Tenant.objects.create(name="Other", slug="other")
    theirs = ask(other, question=REVIEW)
    world.fw_route.mock(return_value=httpx.Response(500, json={"message": "boom"}))
    world.lf_route.mock(return_value=httpx.Response(500, json={"message": "boom"}))
    with pytest.raises(AllBackendsFailedError):  # no answer: nothing to continue
        ask(tenant, question=REVIEW)
    unanswered = RoutingDecision.objects.get(tenant=tenant)

    for session_id in (theirs["session_id"], str(unanswered.request_id)):
        with pytest.raises(NotFoundError):
            ask(tenant, question="and then?", session_id=session_id)
        assert session_known(tenant_id=tenant.pk, session_id=session_id) is None
    assert session_known(tenant_id=other.pk, session_id=theirs["session_id"]) == str(
        theirs["session_id"]
    )
    assert not Session.objects.exists()


def test_the_chat_page_keeps_a_session_from_the_first_question(
    world: World, tenant: Tenant
) -> None:
    async def chat() -> list[dict[str, Any]]:
        asked = query_request({"question": REVIEW})
        return [e async for e in stream_answer(asked, tenant=tenant, keep_session=True)]

    events = async_to_sync(chat)()
    drain()

    end = events[-1]
    assert end["event"] == "end"
    assert end["session_id"] != end["request_id"]
    session = Session.objects.get()
    assert str(session.pk) == end["session_id"]
    assert [t.question for t in session.turns.all()] == [REVIEW]
    assert shared_cache().get(SESSION_KEY.format(id=end["session_id"])) is not None


def test_its_page_shows_the_question_then_the_conversation_that_continued_it(
    world: World, tenant: Tenant
) -> None:
    first = ask(tenant, question=REVIEW)
    scope = Scope(tenant=tenant)

    alone = session_visualization(scope=scope, session_id=first["session_id"])
    assert [t["question"] for t in alone["turns"]] == [REVIEW]
    assert alone["tenant"] == tenant.slug

    ask(tenant, question="and refactor it too", session_id=first["session_id"])
    both = session_visualization(scope=scope, session_id=first["session_id"])
    assert [t["question"] for t in both["turns"]] == [REVIEW, "and refactor it too"]
    assert [t["answer"] for t in both["turns"]] == [FW_ANSWER, FW_ANSWER]

    other = Tenant.objects.create(name="Other", slug="other")
    with pytest.raises(NotFoundError):
        session_visualization(scope=Scope(tenant=other), session_id=first["session_id"])


@pytest.mark.parametrize("write", [decisions_insert, store._orm_insert], ids=["sql", "orm"])
def test_the_writer_starts_a_continued_session_once(world: World, write: Any) -> None:
    tenant = Tenant.objects.get(slug="default")
    one_shot = DecisionData(uuid.uuid4(), tenant.pk, REVIEW, "success", created_at=1.0e9)
    with transaction.atomic():
        write([one_shot])
    opening_id = RoutingDecision.objects.get(request_id=one_shot.request_id).pk
    opening = {
        "question": REVIEW,
        "answer": "kept",
        "intent": "code-review",
        "backend_id": world.fw.pk,
        "flow_id": world.fw_flow.pk,
        "decision_id": opening_id,
        "created_at": one_shot.created_at,
    }

    def continuing(question: str) -> DecisionData:
        return DecisionData(
            uuid.uuid4(),
            tenant.pk,
            question,
            "success",
            session_id=one_shot.request_id,
            answer="yes",
            opening=opening,
        )

    with transaction.atomic():  # two continuations in one batch: one opening
        write([continuing("and then?"), continuing("and after?")])
    with transaction.atomic():  # a later one that still carried it: the session is there
        write([continuing("and last?")])

    session = Session.objects.get(pk=one_shot.request_id)
    turns = list(session.turns.order_by("created_at", "id"))
    assert [(t.question, t.answer) for t in turns] == [
        (REVIEW, "kept"),
        ("and then?", "yes"),
        ("and after?", "yes"),
        ("and last?", "yes"),
    ]
    assert (turns[0].decision_id, turns[0].backend_id, turns[0].flow_id) == (
        opening_id,
        world.fw.pk,
        world.fw_flow.pk,
    )
    assert turns[0].created_at.timestamp() == one_shot.created_at

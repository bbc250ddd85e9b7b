"""The pages for people and the reads behind them: who sees what, and what each shows."""

from __future__ import annotations

import html
import json
import re
from datetime import timedelta
from typing import Any, cast

import httpx
import pytest
from asgiref.sync import async_to_sync
from django.contrib.auth.models import Permission, User
from django.test import Client, override_settings
from django.utils import timezone
from rest_framework.test import APIClient

from analytics import charts
from analytics.health import health_timeline
from analytics.reads import backends_by_intent, totals
from backends.models import Backend, HealthCheck
from flywheel.asgi import application
from flywheel.models import Membership, Tenant
from flywheel.services import api_key_create
from routing.answering.query_input import query_request
from routing.answering.service import answer_question
from routing.errors import AllBackendsFailedError
from routing.models import RoutingDecision, Turn
from routing.recording.writer import drain
from tests.routing_world import FW_ANSWER, World

pytestmark = pytest.mark.django_db(transaction=True)

REVIEW = "Please review my pull request"


def _member(tenant: Tenant, username: str = "alice") -> Client:
    user = User.objects.create_user(username, password="x")
    Membership.objects.create(user=user, tenant=tenant)
    client = Client()
    client.force_login(user)
    return client


def _staff_reader() -> Client:
    user = User.objects.create_user("operator", password="x", is_staff=True)
    user.user_permissions.add(Permission.objects.get(codename="view_routingdecision"))
    client = Client()
    client.force_login(user)
    return client


def _ask(tenant: Tenant, question: str = REVIEW, **fields: object) -> dict:
    body = async_to_sync(answer_question)(
        query_request({"question": question, **fields}), tenant=tenant
    )
    drain()
    return body


@pytest.fixture
def acme(world: World) -> Tenant:
    return Tenant.objects.create(name="Acme", slug="acme")


@pytest.fixture
def globex(world: World) -> Tenant:
    return Tenant.objects.create(name="Globex", slug="globex")


# --- what a decision keeps for its trace -------------------------------------------


def test_an_answered_decision_links_the_turn_holding_its_answer(acme: Tenant) -> None:
    session = _ask(acme, "Please review my other pull request")["session_id"]
    body = _ask(acme, session_id=session)

    decision = RoutingDecision.objects.get(request_id=body["request_id"])
    assert Turn.objects.get(decision=decision).answer == FW_ANSWER


def test_a_one_shot_questions_trace_says_its_answer_was_not_kept(acme: Tenant) -> None:
    body = _ask(acme)

    page = _staff_reader().get(f"/decisions/{body['request_id']}").content.decode()
    assert "The answer was not kept: the question came without a session id" in page
    assert FW_ANSWER not in page


def test_a_failed_decision_keeps_the_message_its_caller_got(world: World, acme: Tenant) -> None:
    session = _ask(acme)["session_id"]  # a conversation, so that /v/<id>/ shows it too
    world.fail(world.fw_route)
    world.fail(world.lf_route)
    with pytest.raises(AllBackendsFailedError) as raised:
        _ask(acme, "And please review this diff too", session_id=session)  # none cached
    drain()

    decision = RoutingDecision.objects.get(outcome="failed")
    assert decision.outcome == "failed"
    assert decision.error_message == raised.value.message
    assert decision.error_message.startswith("No backend could answer")
    # ... and the type: the trace page and the session page say what the caller got.
    reader = _staff_reader()
    for page in (f"/decisions/{decision.request_id}", f"/v/{session}/"):
        shown = html.unescape(re.sub(r"<[^>]+>", "", reader.get(page).content.decode()))
        assert f"AllBackendsFailed: {raised.value.message}" in shown, page
        assert "UnexpectedError: No backend" not in shown


def test_a_cached_answer_says_whose_answer_it_kept(world: World, acme: Tenant) -> None:
    session = _ask(acme)["session_id"]
    world.set_health(world.fw, healthy=True, cooldown=True)
    world.set_health(world.lf, healthy=True, cooldown=True)

    body = _ask(acme, session_id=session)

    decision = RoutingDecision.objects.get(request_id=body["request_id"])
    assert decision.outcome == "cached"
    assert body["routing"]["cached_from"] == {"backend": "fw", "flow": "reviewer"}
    # Kept by id, named as the backend and flow are named when read.
    assert decision.evidence["cached_from"] == [world.fw.pk, world.fw_flow.pk]
    reader = _staff_reader()
    page = reader.get(f"/decisions/{decision.request_id}").content.decode()
    assert "the cache: an earlier answer by fw / reviewer" in page
    assert FW_ANSWER in page
    Backend.objects.filter(pk=world.fw.pk).update(name="fw-renamed")
    page = reader.get(f"/decisions/{decision.request_id}").content.decode()
    assert "the cache: an earlier answer by fw-renamed / reviewer" in page


def test_a_cached_answer_of_a_backend_disabled_since_is_named_from_its_row(
    world: World, acme: Tenant
) -> None:
    """The routing state holds enabled backends only: one disabled since is neither
    missing nor "deleted"."""
    session = _ask(acme)["session_id"]
    world.fw.enabled = False
    world.fw.save()
    world.set_health(world.lf, healthy=True, cooldown=True)

    body = _ask(acme, session_id=session)

    assert RoutingDecision.objects.get(request_id=body["request_id"]).outcome == "cached"
    assert body["routing"]["cached_from"] == {"backend": "fw", "flow": "reviewer"}


def test_an_answer_cached_by_name_before_is_served_and_kept_so(world: World, acme: Tenant) -> None:
    from routing.recording.answers import CachedAnswer, answers_remember

    answers_remember(
        [
            CachedAnswer(
                acme.pk,
                "code-review",
                REVIEW,
                {"answer": "kept earlier", "backend": "fw", "flow": "reviewer"},
                60,
            )
        ]
    )
    world.set_health(world.fw, healthy=True, cooldown=True)
    world.set_health(world.lf, healthy=True, cooldown=True)

    body = _ask(acme)

    assert (body["answer"], body["routing"]["cached_from"]["backend"]) == ("kept earlier", "fw")
    decision = RoutingDecision.objects.get(request_id=body["request_id"])
    assert decision.evidence["cached_from"] == {"backend": "fw", "flow": "reviewer"}


def test_the_trace_leads_with_the_decision_in_words_and_folds_the_answer(
    world: World, acme: Tenant
) -> None:
    """A person reads intent → chosen → why → chain first; the patterns and the answer
    are one click away (a long answer had pushed the chain 6,000 px down)."""
    world.fail(world.fw_route)  # so the chain has a failure and a fallback to read
    session = _ask(acme, "Please review my other pull request")["session_id"]
    body = _ask(acme, session_id=session)  # in a conversation, whose turns keep the answers

    page = _staff_reader().get(f"/decisions/{body['request_id']}").content.decode()

    said = body["routing"]["evidence"]["summary"]
    assert said.startswith("matched 'my pull request' and 'review' (code-review rules ")
    assert f'<span id="intent-summary">{html.escape(said)}</span>' in page
    raw = re.search(r'<details class="raw">(.*?)</details>', page, re.S)
    assert raw is not None
    assert all(html.escape(p) in raw.group(1) for p in body["routing"]["evidence"]["raw"])
    order = [page.index(m) for m in ('id="intent"', 'id="why"', 'id="chain"', 'id="answer"')]
    assert order == sorted(order)
    answer = re.search(r'<div class="card" id="answer"><details><summary>', page)
    assert answer is not None, "the answer is folded"


# --- who sees what ------------------------------------------------------------------


def test_a_member_sees_only_their_tenants_decisions(acme: Tenant, globex: Tenant) -> None:
    mine, theirs = _ask(acme, "Review my diff please"), _ask(globex, "Review their diff")

    page = _member(acme).get("/analytics/decisions/").content.decode()

    assert "Review my diff please" in page
    assert "Review their diff" not in page
    assert _member(acme, "bob").get(f"/decisions/{theirs['request_id']}").status_code == 404
    assert _member(acme, "carol").get(f"/decisions/{mine['request_id']}").status_code == 200


def test_staff_see_every_tenant_and_can_pick_one(acme: Tenant, globex: Tenant) -> None:
    _ask(acme, "Review my diff please")
    _ask(globex, "Review their diff")
    staff = _staff_reader()

    every = staff.get("/analytics/decisions/").content.decode()
    picked = staff.get("/analytics/decisions/?tenant=globex").content.decode()

    assert "Review my diff please" in every
    assert "Review their diff" in every
    assert "Review their diff" in picked
    assert "Review my diff please" not in picked


def test_a_person_acting_for_no_tenant_is_told_how_to_fix_it(world: World) -> None:
    client = Client()
    client.force_login(User.objects.create_user("drifter", password="x"))

    response = client.get("/analytics/")

    assert response.status_code == 403
    assert "Memberships" in response.content.decode()


@pytest.mark.parametrize("path", ["/", "/analytics/", "/analytics/decisions/", "/chat/"])
def test_every_page_needs_a_login(world: World, path: str) -> None:
    response = Client().get(path)

    assert response.status_code == 302
    assert response["Location"].startswith("/admin/login/")


def test_a_key_reads_analytics_of_its_own_tenant_only(acme: Tenant, globex: Tenant) -> None:
    _, raw = api_key_create(tenant=acme, name="k")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")

    assert client.get("/api/v1/analytics/backends-by-intent?tenant=acme").status_code == 200
    refused = client.get("/api/v1/analytics/backends-by-intent?tenant=globex")
    assert refused.status_code == 403
    assert refused.json()["error"]["type"] == "PermissionDenied"


def test_the_analytics_csv_links_work_with_a_staff_login(acme: Tenant, globex: Tenant) -> None:
    _ask(acme)
    _ask(globex)
    staff = _staff_reader()

    every = staff.get("/api/v1/analytics/backends-by-intent?format=csv").content.decode()
    one = staff.get("/api/v1/analytics/backends-by-intent?format=csv&tenant=acme").content.decode()

    assert every.splitlines()[1].startswith("code-review,fw,2,")
    assert one.splitlines()[1].startswith("code-review,fw,1,")


# --- the reads behind the pages -----------------------------------------------------


def test_routing_preference_is_reported_with_its_reasons(world: World, acme: Tenant) -> None:
    _ask(acme)

    found = backends_by_intent(tenant=acme)
    preferred = found["intents"][0]["preferred"]

    # fw answered once; lf, never tried, is judged by its prior, which fw's answer is
    # part of: the two are estimated alike, and the tie goes to the name.
    assert preferred["backend"] == "fw"
    assert preferred["flow"] == "reviewer"
    assert [(c["backend"], c["flow"], c["recent_attempts"]) for c in preferred["candidates"]] == [
        ("fw", "reviewer", 1.0),
        ("lf", "echo", 0),
        ("lf", "anything", 0),  # lf's generic flow, behind its flow for the intent
    ]
    why = preferred["why"]
    assert "fw / reviewer: 87 % of 1 recent attempts answered (±" in why  # (1.6 + 1) / 3
    assert "lf / echo: no recent attempts; judged by its prior" in why
    assert "chosen for the expected" in why
    assert "still go to" not in why  # the world does not explore


def test_no_preference_when_every_backend_is_in_cooldown(world: World, acme: Tenant) -> None:
    _ask(acme)
    world.set_health(world.fw, healthy=False, cooldown=True)
    world.set_health(world.lf, healthy=False, cooldown=True)

    preferred = backends_by_intent(tenant=acme)["intents"][0]["preferred"]

    assert preferred["backend"] is None
    assert "cooldown" in preferred["why"]


def test_the_health_timeline_counts_probes_per_bucket(world: World) -> None:
    now = timezone.now()
    for ok, ago in ((True, 50), (False, 40), (True, 30)):
        check = HealthCheck.objects.create(backend=world.fw, ok=ok, latency_ms=10)
        HealthCheck.objects.filter(pk=check.pk).update(checked_at=now - timedelta(minutes=ago))

    found = health_timeline(tenant=None, since=now - timedelta(hours=2), until=now)

    fw = next(b for b in found["backends"] if b["backend"] == "fw")
    assert [(b["state"], b["checks"]) for b in fw["buckets"]] == [("up", 1), ("down", 1), ("up", 1)]
    lf = next(b for b in found["backends"] if b["backend"] == "lf")
    assert lf["buckets"] == []


def test_todays_totals_count_decisions_and_answers(world: World, acme: Tenant) -> None:
    _ask(acme)
    with pytest.raises(Exception):  # noqa: B017, PT011 - any refusal will do: it is recorded
        _ask(acme, "x", intent="no-such-intent")
    drain()

    found = totals(tenant=acme, since=timezone.now() - timedelta(hours=1))

    assert found == {"decisions": 2, "answered": 1, "success_rate": 0.5}


# --- the pages ----------------------------------------------------------------------


def test_the_front_page_lists_backends_with_their_health(world: World, admin_client) -> None:
    page = admin_client.get("/").content.decode()

    assert 'id="backends"' in page
    assert "fw" in page
    assert "healthy" in page
    assert "sk-FW-SECRET" not in page


def test_the_front_page_gives_three_steps_when_nothing_is_registered(admin_client) -> None:
    page = admin_client.get("/").content.decode()

    assert 'id="first-steps"' in page
    assert "No backend is registered yet" in page


def test_the_analytics_page_has_an_empty_state_and_then_numbers(acme: Tenant) -> None:
    member = _member(acme)
    assert 'id="empty-state"' in member.get("/analytics/").content.decode()

    first = _ask(acme)
    _ask(acme, "Summarize that", intent="summarize", session_id=first["session_id"])
    page = member.get("/analytics/?range=1h").content.decode()

    assert 'id="empty-state"' not in page
    assert 'data-intent="code-review" data-backend="fw"' in page
    assert "Routing now prefers <strong>fw</strong> / reviewer: " in page
    assert "reviewer: fw / reviewer:" not in page  # the flow named once, not twice
    assert 'data-intent="summarize"' in page
    assert page.count('class="bar"') >= 6  # volume, success and p95 bars of both intents


def _shown(page: str) -> str:
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", page)).split())


def test_the_analytics_page_pluralises_and_rounds_its_numbers(world: World, acme: Tenant) -> None:
    first = _ask(acme)
    _ask(acme, "Summarize that", intent="summarize", session_id=first["session_id"])
    _ask(acme, "Summarize it again", intent="summarize", session_id=first["session_id"])
    member = _member(acme)

    page = member.get("/analytics/?range=24h").content.decode()
    minutes = _shown(member.get("/analytics/?range=1h").content.decode())

    shown = _shown(page)
    assert "1 decision," in shown
    assert "2 decisions," in shown
    assert "1 decisions" not in shown
    assert "Each cell is an hour with health probes" in shown
    assert "a hour" not in shown
    assert "Each cell is a minute with health probes" in minutes
    scores = re.findall(r'class="num score">([^<]*)<', page)
    assert scores
    assert all(re.fullmatch(r"\d+\.\d\d|—", score) for score in scores)
    for intent in ("code-review", "summarize"):
        row = re.findall(rf'data-intent="{intent}".*?class="num share">(\d+)%', page, re.S)
        unrouted = re.search(
            rf"<strong>{intent}</strong>.*?(?:(\d+)% answered by no backend)?</span>", page, re.S
        )
        assert unrouted is not None
        assert sum(map(int, row)) + int(unrouted.group(1) or 0) == 100


def test_the_intent_filter_changes_the_numbers(acme: Tenant) -> None:
    _ask(acme)
    member = _member(acme)

    every = member.get("/analytics/").content.decode()
    other = member.get("/analytics/?intent=summarize").content.decode()

    assert 'data-intent="code-review"' in every
    assert 'data-intent="code-review"' not in other


def test_a_bad_filter_is_a_page_naming_it(acme: Tenant) -> None:
    response = _member(acme).get("/analytics/decisions/?outcome=nope")

    assert response.status_code == 400
    assert "outcome" in response.content.decode()


def test_the_session_page_and_api_draw_each_turn(world: World, acme: Tenant) -> None:
    first = _ask(acme)
    world.fail(world.fw_route)
    second = _ask(acme, "Please review my pull request again", session_id=first["session_id"])
    _, raw = api_key_create(tenant=acme, name="k")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")

    data = client.get(f"/api/v1/visualize/{first['session_id']}").json()
    page = _member(acme).get(f"/v/{first['session_id']}/").content.decode()

    assert [t["request_id"] for t in data["turns"]] == [first["request_id"], second["request_id"]]
    turn = data["turns"][1]
    assert [a["ok"] for a in turn["fallback_chain"]] == [False, True]
    assert turn["answered_by"] == {"source": "backend", "backend": "lf", "flow": "echo"}
    assert turn["answer"] == "hello langflow"
    assert turn["trace_url"] == f"http://testserver/decisions/{second['request_id']}"
    assert page.count('class="card turn"') == 2
    assert "Answer by lf" in page
    assert "continue in chat" in page  # the member's own conversation
    staff_view = _staff_reader().get(f"/v/{first['session_id']}/").content.decode()
    assert "continue in chat" not in staff_view  # staff act for no tenant: not theirs


def test_another_tenants_session_is_not_found(acme: Tenant, globex: Tenant) -> None:
    theirs = _ask(globex)
    _, raw = api_key_create(tenant=acme, name="k")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")

    assert client.get(f"/api/v1/visualize/{theirs['session_id']}").status_code == 404
    assert _member(acme).get(f"/v/{theirs['session_id']}/").status_code == 404


def test_the_chat_streams_an_answer_and_lists_the_conversation(world: World, acme: Tenant) -> None:
    member = _member(acme)

    response = member.post("/chat/ask", {"question": REVIEW}, content_type="application/json")

    async def read() -> bytes:
        return b"".join([chunk async for chunk in response.streaming_content])  # type: ignore[attr-defined]

    blocks = [b for b in async_to_sync(read)().decode().split("\n\n") if b]
    end = json.loads(blocks[-1].splitlines()[1].removeprefix("data: "))
    assert end["answer"] == FW_ANSWER
    assert end["routing"]["intent"] == "code-review"
    drain()
    listed = member.get("/chat/conversations").json()["conversations"]
    assert [(c["first_question"], c["turn_count"]) for c in listed] == [(REVIEW, 1)]
    assert listed[0]["preview"] == FW_ANSWER[:140]
    turns = member.get(f"/chat/conversations/{end['session_id']}").json()["turns"]
    assert turns == [{"question": REVIEW, "answer": FW_ANSWER, "intent": "code-review"}]


def test_the_chat_refuses_fields_it_does_not_take(acme: Tenant) -> None:
    response = _member(acme).post(
        "/chat/ask", {"question": REVIEW, "backend": "fw"}, content_type="application/json"
    )

    assert response.status_code == 400
    assert response.json()["error"]["type"] == "ValidationError"
    assert not RoutingDecision.objects.exists()


def test_the_admin_index_shows_todays_figures(world: World, acme: Tenant, admin_client) -> None:
    _ask(acme)
    world.set_health(world.lf, healthy=False)

    page = admin_client.get("/admin/").content.decode()

    assert 'id="flywheel-today"' in page
    assert "<td>1</td>" in page  # one question today
    assert "<td>lf</td>" in page  # the one unhealthy backend


def test_the_admin_index_shows_staff_without_the_permission_their_tenant_only(
    acme: Tenant, globex: Tenant
) -> None:
    _ask(acme)
    _ask(globex)
    _ask(globex, "Please review my other pull request")
    user = User.objects.create_user("clerk", password="x", is_staff=True)
    Membership.objects.create(user=user, tenant=acme)
    client = Client()
    client.force_login(user)

    page = client.get("/admin/").content.decode()

    assert 'id="flywheel-today"' in page
    assert "<td>1</td>" in page  # acme's one question, not the three of every tenant


def test_the_admin_decision_page_links_its_trace(acme: Tenant, admin_client) -> None:
    body = _ask(acme)
    decision = RoutingDecision.objects.get(request_id=body["request_id"])

    page = admin_client.get(f"/admin/routing/routingdecision/{decision.pk}/change/")

    shown = page.content.decode()
    assert f'href="/decisions/{decision.request_id}"' in shown
    # Its candidates and chain as they read, names and all, not as the row keeps them.
    assert '"backend": "fw"' in html.unescape(shown)
    assert '"flow": "reviewer"' in html.unescape(shown)


@override_settings(RATE_LIMIT=(1, 60))
def test_a_person_asking_too_often_is_told_to_wait(world: World, acme: Tenant) -> None:
    member = _member(acme)
    first = member.post("/chat/ask", {"question": REVIEW}, content_type="application/json")
    assert first.status_code == 200

    refused = member.post("/chat/ask", {"question": REVIEW}, content_type="application/json")

    assert refused.status_code == 429
    assert refused["Retry-After"]
    assert refused.json()["error"]["message"].startswith("Your account is over its rate limit")


def test_the_charts_escape_backend_names() -> None:
    now = timezone.now()
    name = '<img src=x onerror="alert(1)">'
    point = {"start": now, "requests": 3, "ok": 1, "checks": 2, "state": "mixed"}
    drawn = [
        charts.comparison_chart(
            [
                {
                    "intent": name,
                    "decisions": 1,
                    "backends": [
                        {"backend": name, "requests": 3, "success_rate": 1.0, "p95_ms": 9.0}
                    ],
                }
            ],
            charts.colours([name]),
        ),
        charts.traffic_chart(
            [{"backend": name, "buckets": [point]}],
            start=now - timedelta(hours=1),
            end=now,
            step=timedelta(minutes=1),
        ),
        charts.health_chart(
            [{"backend": name, "buckets": [point]}],
            start=now - timedelta(hours=1),
            end=now,
            step=timedelta(minutes=1),
        ),
    ]

    for svg in drawn:
        assert "<img" not in svg
        assert "&lt;img src=x" in svg


def test_the_decision_list_pages_without_counting(acme: Tenant) -> None:
    RoutingDecision.objects.bulk_create(
        RoutingDecision(tenant=acme, question=f"Question number {i:03d}", outcome="success")
        for i in range(51)
    )
    member = _member(acme)

    first = member.get("/analytics/decisions/").content.decode()
    older = re.search(r'<a href="([^"]+)">older →</a>', first)
    assert older is not None
    second = member.get("/analytics/decisions/" + html.unescape(older.group(1))).content.decode()

    assert first.count("Question number") == 50
    assert second.count("Question number") == 1
    assert "← newer" in second
    assert "older →" not in second


def test_a_session_id_that_is_not_a_uuid_is_not_found(acme: Tenant) -> None:
    _, raw = api_key_create(tenant=acme, name="k")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")

    response = client.get("/api/v1/visualize/None")
    schema = client.get("/api/v1/schema", {"format": "json"}).json()

    assert response.status_code == 404
    assert response.json()["error"]["type"] == "NotFoundError"
    [parameter] = schema["paths"]["/api/v1/visualize/{session_id}"]["get"]["parameters"]
    assert parameter["schema"] == {"type": "string", "format": "uuid"}


def _served(client: Client, path: str, **headers: str) -> httpx.Response:
    """GET ``path`` as the server serves it (flywheel.asgi: the API without the browser
    middleware), with ``client``'s login cookie; the test Client's WSGI handler runs
    the full middleware, so it cannot tell."""

    async def get() -> httpx.Response:
        transport = httpx.ASGITransport(app=cast(Any, application))
        cookies = {name: morsel.value for name, morsel in client.cookies.items()}
        async with httpx.AsyncClient(
            transport=transport, base_url="http://127.0.0.1", cookies=cookies
        ) as http:
            return await http.get(path, headers=headers)

    return async_to_sync(get)()


def test_the_csv_links_and_the_visualize_json_work_with_the_page_login_when_served(
    acme: Tenant,
) -> None:
    first = _ask(acme)
    staff, member = _staff_reader(), _member(acme)
    _, raw = api_key_create(tenant=acme, name="k")

    csv_link = _served(staff, "/api/v1/analytics/backends-by-intent?format=csv&tenant=acme")
    series = _served(member, "/api/v1/analytics/timeseries?format=csv")
    visualized = _served(member, f"/api/v1/visualize/{first['session_id']}")
    by_key = _served(
        Client(), f"/api/v1/visualize/{first['session_id']}", Authorization=f"Bearer {raw}"
    )
    anonymous = _served(Client(), f"/api/v1/visualize/{first['session_id']}")

    assert csv_link.status_code == 200, csv_link.text
    assert csv_link.text.splitlines()[1].startswith("code-review,fw,1,")
    assert series.status_code == 200, series.text
    assert series.headers["content-type"].startswith("text/csv")
    assert visualized.status_code == 200, visualized.text
    assert [t["request_id"] for t in visualized.json()["turns"]] == [first["request_id"]]
    assert by_key.status_code == 200
    assert anonymous.status_code == 401
    assert anonymous.json()["error"]["type"] == "AuthenticationError"


def test_a_logged_out_or_deactivated_page_login_is_refused_when_served(acme: Tenant) -> None:
    first = _ask(acme)
    member = _member(acme, "bob")
    path = f"/api/v1/visualize/{first['session_id']}"
    assert _served(member, path).status_code == 200

    User.objects.filter(username="bob").update(is_active=False)

    assert _served(member, path).status_code == 401


def test_the_session_pages_json_link_works_for_its_reader(acme: Tenant) -> None:
    first = _ask(acme)

    response = _member(acme).get(f"/api/v1/visualize/{first['session_id']}")

    assert response.status_code == 200
    assert [t["request_id"] for t in response.json()["turns"]] == [first["request_id"]]

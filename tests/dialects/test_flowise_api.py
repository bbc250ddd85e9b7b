"""Flowise's prediction API served by Flywheel (/compat/flowise): an application written
for a Flowise server changes only its base URL. Requests in Flowise's documented shapes,
through Flywheel's ASGI app; the backends answer with captured responses."""

from __future__ import annotations

import json
from typing import Any, cast

import httpx
import pytest
from asgiref.sync import sync_to_async

from flywheel.asgi import application
from flywheel.asyncdb import db
from routing.models import RoutingDecision, Turn
from routing.recording.writer import drain
from tests.captured import response
from tests.routing_world import FW_ANSWER, FW_FLOW, World

pytestmark = pytest.mark.django_db(transaction=True)

BASE = "http://127.0.0.1/compat/flowise"
REVIEW = "Please review my pull request"


async def predict(key: str | None, flow: str, body: dict[str, Any]) -> httpx.Response:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    transport = httpx.ASGITransport(app=cast(Any, application))
    async with httpx.AsyncClient(transport=transport) as client:
        return await client.post(f"{BASE}/api/v1/prediction/{flow}", json=body, headers=headers)


async def test_a_prediction_by_flowise_id_is_answered_in_flowises_shape(
    world: World, raw_api_key: str
) -> None:
    answered = await predict(raw_api_key, FW_FLOW, {"question": REVIEW})

    assert answered.status_code == 200
    body = answered.json()
    assert body["text"] == FW_ANSWER
    assert body["question"] == REVIEW
    assert body["chatId"] == body["sessionId"] == body["flywheel"]["session_id"]
    assert body["chatMessageId"] == body["flywheel"]["request_id"]
    assert (body["flywheel"]["backend"], body["flywheel"]["flow"]) == ("fw", "reviewer")
    await sync_to_async(drain)()
    decision = await db(RoutingDecision.objects.get)(request_id=body["chatMessageId"])
    assert decision.routing_method == "explicit"


async def test_a_flow_named_by_name_runs_and_overrides_and_history_reach_it(
    world: World, raw_api_key: str
) -> None:
    history = [
        {"role": "userMessage", "content": "Here is my diff"},
        {"role": "apiMessage", "content": "Looks fine."},
    ]
    await db(world.tunable)(world.fw_flow, ("temperature", "ChatOpenAI", "temperature"))
    answered = await predict(
        raw_api_key,
        "Reviewer",
        {"question": REVIEW, "overrideConfig": {"temperature": 0.3}, "history": history},
    )

    assert answered.status_code == 200, answered.json()
    sent = world.sent_to_flowise()
    assert sent["overrideConfig"]["temperature"] == 0.3
    assert sent["history"] == history
    await sync_to_async(drain)()


async def test_the_chat_id_of_an_answer_continues_its_conversation_and_any_other_starts_one(
    world: World, raw_api_key: str
) -> None:
    first = (await predict(raw_api_key, FW_FLOW, {"question": REVIEW})).json()
    again = (
        await predict(
            raw_api_key, FW_FLOW, {"question": "And the tests?", "chatId": first["chatId"]}
        )
    ).json()
    other = (
        await predict(raw_api_key, FW_FLOW, {"question": REVIEW, "chatId": "my-own-chat-7"})
    ).json()
    await sync_to_async(drain)()

    assert again["chatId"] == first["chatId"]
    assert other["chatId"] not in (first["chatId"], "my-own-chat-7")
    questions = Turn.objects.filter(session_id=first["chatId"]).values_list("question", flat=True)
    turns = await db(list)(questions)
    assert turns == [REVIEW, "And the tests?"]


async def test_a_streamed_prediction_comes_in_flowises_events(
    world: World, raw_api_key: str
) -> None:
    world.fw_route.mock(return_value=response("flowise", "prediction_agentflow_stream"))

    streamed = await predict(raw_api_key, FW_FLOW, {"question": REVIEW, "streaming": True})

    assert streamed.headers["content-type"] == "text/event-stream"
    blocks = [b for b in streamed.text.split("\n\n") if b]
    assert all(b.startswith("message:\ndata:") for b in blocks)
    events = [json.loads(b.split("data:", 1)[1]) for b in blocks]
    assert "".join(e["data"] for e in events if e["event"] == "token") == FW_ANSWER
    assert [e["event"] for e in events if e["event"] != "token"] == ["metadata", "end"]
    metadata = next(e["data"] for e in events if e["event"] == "metadata")
    assert metadata["question"] == REVIEW
    assert metadata["flywheel"]["backend"] == "fw"
    assert events[-1] == {"event": "end", "data": "[DONE]"}
    await sync_to_async(drain)()


@pytest.mark.parametrize(
    ("key", "flow", "body", "status", "kind"),
    [
        ("valid", FW_FLOW, {}, 400, "ValidationError"),
        (
            "valid",
            FW_FLOW,
            {"question": REVIEW, "uploads": [{"type": "file"}]},
            400,
            "ValidationError",
        ),
        ("valid", "no-such-flow", {"question": REVIEW}, 404, "NotFoundError"),
        (None, FW_FLOW, {"question": REVIEW}, 401, "AuthenticationError"),
    ],
)
async def test_errors_take_flowises_shape_with_flywheels_beside(
    world: World,
    raw_api_key: str,
    key: str | None,
    flow: str,
    body: dict[str, Any],
    status: int,
    kind: str,
) -> None:
    refused = await predict(raw_api_key if key else None, flow, body)

    assert refused.status_code == status
    error = refused.json()
    assert error["statusCode"] == status
    assert error["success"] is False
    assert error["message"]
    assert error["error"]["type"] == kind
    assert world.fw_route.calls.call_count == 0


async def test_flowises_client_asks_whether_a_flow_streams_without_a_key(world: World) -> None:
    transport = httpx.ASGITransport(app=cast(Any, application))
    async with httpx.AsyncClient(transport=transport) as client:
        asked = await client.get(f"{BASE}/api/v1/chatflows-streaming/{FW_FLOW}")

    assert asked.status_code == 200
    assert asked.json() == {"isStreaming": True}

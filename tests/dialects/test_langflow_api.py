"""Langflow's run API served by Flywheel (/compat/langflow): requests in the shapes
Langflow's documentation gives (curl with ``x-api-key``, input and output types,
tweaks, a session, ``?stream=true``), through Flywheel's ASGI app; the backends answer
with responses captured from the real servers."""

from __future__ import annotations

import json
from typing import Any, cast

import httpx
import pytest
from asgiref.sync import sync_to_async

from flywheel.asgi import application
from flywheel.asyncdb import db
from routing.models import Turn
from routing.recording.writer import drain
from tests.captured import response
from tests.routing_world import LF_ANSWER, LF_FLOW, World

pytestmark = pytest.mark.django_db(transaction=True)

BASE = "http://127.0.0.1/compat/langflow"
QUESTION = "hello langflow"


async def run(
    headers: dict[str, str], flow: str, body: dict[str, Any], stream: bool = False
) -> httpx.Response:
    transport = httpx.ASGITransport(app=cast(Any, application))
    url = f"{BASE}/api/v1/run/{flow}" + ("?stream=true" if stream else "")
    async with httpx.AsyncClient(transport=transport) as client:
        return await client.post(url, json=body, headers=headers)


def documented(question: str = QUESTION, **more: Any) -> dict[str, Any]:
    """The body Langflow's API documentation shows for a chat flow."""
    return {"input_value": question, "output_type": "chat", "input_type": "chat", **more}


async def test_the_documented_request_is_answered_where_langflows_docs_read_the_answer(
    world: World, raw_api_key: str
) -> None:
    answered = await run({"x-api-key": raw_api_key}, LF_FLOW, documented())

    assert answered.status_code == 200, answered.json()
    body = answered.json()
    output = body["outputs"][0]["outputs"][0]
    assert output["results"]["message"]["text"] == LF_ANSWER
    assert output["artifacts"]["message"] == LF_ANSWER
    assert output["outputs"]["message"]["message"] == LF_ANSWER
    assert output["messages"][0]["message"] == LF_ANSWER
    assert body["outputs"][0]["inputs"] == {"input_value": QUESTION}
    assert body["session_id"] == body["flywheel"]["session_id"]
    assert (body["flywheel"]["backend"], body["flywheel"]["flow"]) == ("lf", "echo")
    await sync_to_async(drain)()


async def test_a_flow_named_by_name_with_a_bearer_key_gets_its_tweaks(
    world: World, raw_api_key: str
) -> None:
    tweaks = {"ChatOutput-echo1": {"should_store_message": False}}
    answered = await run(
        {"Authorization": f"Bearer {raw_api_key}"}, "echo", documented(tweaks=tweaks)
    )

    assert answered.status_code == 200, answered.json()
    assert world.sent_to_langflow()["tweaks"] == tweaks
    await sync_to_async(drain)()


async def test_a_session_id_an_answer_gave_continues_and_any_other_starts_one(
    world: World, raw_api_key: str
) -> None:
    key = {"x-api-key": raw_api_key}
    first = (await run(key, LF_FLOW, documented())).json()
    again = (
        await run(key, LF_FLOW, documented("and again", session_id=first["session_id"]))
    ).json()
    other = (await run(key, LF_FLOW, documented(session_id="my-own-session"))).json()
    await sync_to_async(drain)()

    assert again["session_id"] == first["session_id"]
    assert other["session_id"] not in (first["session_id"], "my-own-session")
    questions = Turn.objects.filter(session_id=first["session_id"]).values_list(
        "question", flat=True
    )
    assert await db(list)(questions) == [QUESTION, "and again"]


async def test_a_streamed_run_comes_in_langflows_events(world: World, raw_api_key: str) -> None:
    world.lf_route.mock(return_value=response("langflow", "run_stream"))

    streamed = await run({"x-api-key": raw_api_key}, LF_FLOW, documented(), stream=True)

    assert streamed.headers["content-type"].startswith("text/event-stream")
    events = [json.loads(block) for block in streamed.text.split("\n\n") if block.strip()]
    names = [e["event"] for e in events]
    assert names[0] == "add_message"
    assert names[-2:] == ["add_message", "end"]
    assert set(names[1:-2]) <= {"token"}
    assert events[0]["data"]["sender"] == "User"
    assert events[-2]["data"] == {**events[-2]["data"], "sender": "Machine", "text": LF_ANSWER}
    result = events[-1]["data"]["result"]
    assert result["outputs"][0]["outputs"][0]["results"]["message"]["text"] == LF_ANSWER
    await sync_to_async(drain)()


@pytest.mark.parametrize(
    ("headers", "flow", "body", "status", "kind"),
    [
        ({}, LF_FLOW, documented(), 401, "AuthenticationError"),
        ("key", LF_FLOW, {"output_type": "chat"}, 400, "ValidationError"),
        ("key", LF_FLOW, documented(input_type="image"), 400, "ValidationError"),
        ("key", "No such flow here", documented(), 404, "NotFoundError"),
        ("key", f"{LF_FLOW}?stream=maybe", documented(), 400, "ValidationError"),
        ("key", f"{LF_FLOW}?stream=true&streem=true", documented(), 400, "ValidationError"),
        ("key", LF_FLOW, documented(" \r "), 400, "ValidationError"),
    ],
)
async def test_errors_take_langflows_shape_with_flywheels_beside(
    world: World,
    raw_api_key: str,
    headers: Any,
    flow: str,
    body: dict[str, Any],
    status: int,
    kind: str,
) -> None:
    sent = {"x-api-key": raw_api_key} if headers == "key" else headers
    refused = await run(sent, flow, body)

    assert refused.status_code == status
    assert refused.json()["detail"]
    assert refused.json()["error"]["type"] == kind
    assert world.lf_route.calls.call_count == 0

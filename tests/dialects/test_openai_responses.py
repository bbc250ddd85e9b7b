"""The Responses API's basic text form, through the ``openai`` package's own client."""

from __future__ import annotations

from typing import Any, cast

import openai
import pytest
from asgiref.sync import sync_to_async
from openai.types.responses import ResponseOutputMessage

from routing.models import RoutingDecision
from routing.recording.writer import drain
from tests.captured import response
from tests.dialects.test_openai_api import REVIEW, async_client, sync_client
from tests.routing_world import FW_ANSWER, LF_ANSWER, World

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_response_is_the_routed_flows_answer(world: World, raw_api_key: str) -> None:
    raw = sync_client(raw_api_key).responses.with_raw_response.create(
        model="flywheel", input=REVIEW
    )
    answer = raw.parse()

    assert answer.output_text == FW_ANSWER  # the answer, and only it
    assert answer.status == "completed"
    assert answer.model == "flywheel"
    message = answer.output[0]
    assert isinstance(message, ResponseOutputMessage)
    assert message.role == "assistant"
    flywheel = (answer.model_extra or {})["flywheel"]
    assert (flywheel["backend"], flywheel["flow"], flywheel["intent"]) == (
        "fw",
        "reviewer",
        "code-review",
    )
    assert raw.headers["X-Flywheel-Backend"] == "fw"
    drain()
    assert RoutingDecision.objects.get(request_id=flywheel["request_id"]).question == REVIEW


def test_a_conversation_as_input_reaches_the_flow_and_instructions_are_named(
    world: World, raw_api_key: str
) -> None:
    answer = sync_client(raw_api_key).responses.create(
        model="lf/echo",
        instructions="Be terse.",
        input=cast(  # as a client sends an earlier answer back: without its id
            Any,
            [
                {"role": "user", "content": "Here is my diff: x = 1"},
                {"role": "assistant", "content": [{"type": "output_text", "text": "Looks fine."}]},
                {"role": "user", "content": [{"type": "input_text", "text": REVIEW}]},
            ],
        ),
        max_output_tokens=64,
        top_p=0.5,
    )

    assert answer.output_text == LF_ANSWER
    sent = world.sent_to_langflow()["input_value"]
    assert sent.startswith("Conversation so far:\nUser: Here is my diff: x = 1")
    assert sent.endswith(f"User: {REVIEW}")
    assert (answer.model_extra or {})["flywheel"]["warnings"] == [
        "System and developer messages are not sent: a flow keeps its own prompt.",
        "Not passed to flows, which do not take them: top_p.",
        "max_tokens was not applied: flow 'echo' on lf has no model component that takes it.",
    ]
    drain()


async def test_a_streamed_response_comes_as_openais_events(world: World, raw_api_key: str) -> None:
    world.fw_route.mock(return_value=response("flowise", "prediction_agentflow_stream"))
    stream = await async_client(raw_api_key).responses.create(
        model="flywheel", input=REVIEW, stream=True
    )
    events = [event async for event in stream]

    assert [e.type for e in events[:3]] == [
        "response.created",
        "response.output_item.added",
        "response.content_part.added",
    ]
    deltas = [e.delta for e in events if e.type == "response.output_text.delta"]
    assert "".join(deltas) == FW_ANSWER
    completed = events[-1]
    assert completed.type == "response.completed"
    assert completed.response.output_text == FW_ANSWER
    assert (completed.response.model_extra or {})["flywheel"]["backend"] == "fw"
    assert [e.sequence_number for e in events] == list(range(1, len(events) + 1))
    await sync_to_async(drain)()


def test_what_the_door_cannot_do_is_refused_in_openais_shape(
    world: World, raw_api_key: str
) -> None:
    client = sync_client(raw_api_key)
    with pytest.raises(openai.NotFoundError) as unknown:
        client.responses.create(model="nowhere/none", input=REVIEW)
    assert unknown.value.code == "model_not_found"
    with pytest.raises(openai.BadRequestError) as tools:
        client.responses.create(model="flywheel", input=REVIEW, tools=[{"type": "web_search"}])
    assert tools.value.param == "tools"
    with pytest.raises(openai.BadRequestError) as last:
        client.responses.create(
            model="flywheel", input=[{"role": "assistant", "content": "no question"}]
        )
    assert last.value.param == "input"
    with pytest.raises(openai.BadRequestError) as blank:
        client.responses.create(model="flywheel", input=" \n")
    assert blank.value.param == "input"
    assert RoutingDecision.objects.count() == 0

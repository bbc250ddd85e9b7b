"""The OpenAI-compatible door, through the clients applications use: the ``openai``
package (sync, async, streaming) and LangChain's ``ChatOpenAI``.

The clients talk to Flywheel's ASGI app in this process (httpx's ASGI transport;
the sync clients through AsgiSync below); the backends behind it answer with
responses captured from the real servers (tests/routing_world.py).
"""

from __future__ import annotations

import asyncio
from typing import Any, cast

import httpx2
import openai
import pytest
from asgiref.sync import sync_to_async
from langchain_openai import ChatOpenAI

from flywheel.asgi import application
from flywheel.asyncdb import db
from routing.models import RoutingDecision
from routing.recording.writer import drain
from tests.captured import response
from tests.routing_world import FW_ANSWER, World

pytestmark = pytest.mark.django_db(transaction=True)

BASE_URL = "http://127.0.0.1/v1"
REVIEW = "Please review my pull request"


def _asgi() -> httpx2.ASGITransport:
    return httpx2.ASGITransport(app=cast(Any, application))


class AsgiSync(httpx2.BaseTransport):
    """A sync httpx transport onto the ASGI app: each request runs in an event loop of
    its own (the sync clients', as a server's thread would serve them)."""

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        async def send() -> httpx2.Response:
            async with httpx2.AsyncClient(transport=_asgi()) as client:
                sent = httpx2.Request(
                    request.method, request.url, headers=request.headers, content=request.read()
                )
                got = await client.send(sent)
                return httpx2.Response(got.status_code, headers=got.headers, content=got.content)

        return asyncio.run(send())


def sync_client(key: str) -> openai.OpenAI:
    return openai.OpenAI(
        base_url=BASE_URL, api_key=key, http_client=httpx2.Client(transport=AsgiSync())
    )


def async_client(key: str) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(
        base_url=BASE_URL, api_key=key, http_client=httpx2.AsyncClient(transport=_asgi())
    )


def test_the_openai_client_is_answered_by_the_routed_flow(world: World, raw_api_key: str) -> None:
    raw = sync_client(raw_api_key).chat.completions.with_raw_response.create(
        model="flywheel", messages=[{"role": "user", "content": REVIEW}]
    )
    completion = raw.parse()

    assert completion.choices[0].message.content == FW_ANSWER  # the answer, and only it
    assert completion.choices[0].finish_reason == "stop"
    assert completion.model == "flywheel"
    flywheel = (completion.model_extra or {})["flywheel"]
    assert flywheel["backend"] == "fw"
    assert flywheel["flow"] == "reviewer"
    assert flywheel["intent"] == "code-review"
    assert flywheel["trace_url"] == f"http://127.0.0.1/decisions/{flywheel['request_id']}"
    assert raw.headers["X-Flywheel-Backend"] == "fw"
    assert raw.headers["X-Flywheel-Intent"] == "code-review"
    assert raw.headers["X-Flywheel-Trace"] == flywheel["trace_url"]
    drain()
    decision = RoutingDecision.objects.get(request_id=flywheel["request_id"])
    assert decision.question == REVIEW
    assert decision.outcome == "success"


async def test_the_conversation_so_far_goes_to_the_flow_and_system_messages_are_named(
    world: World, raw_api_key: str
) -> None:
    # The flow lets callers override its temperature, not its max tokens.
    await db(world.tunable)(world.fw_flow, ("temperature", "ChatOpenAI", "temperature"))
    completion = await async_client(raw_api_key).chat.completions.create(
        model="flywheel",
        messages=[
            {"role": "system", "content": "You are terse."},
            {"role": "user", "content": "Here is my diff: x = 1"},
            {"role": "assistant", "content": "Looks fine."},
            {"role": "user", "content": [{"type": "text", "text": REVIEW}]},
        ],
        temperature=0.2,
        max_tokens=64,
        top_p=0.5,
    )

    sent = world.sent_to_flowise()
    assert sent["question"] == REVIEW
    assert sent["history"] == [
        {"role": "userMessage", "content": "Here is my diff: x = 1"},
        {"role": "apiMessage", "content": "Looks fine."},
    ]
    assert sent["overrideConfig"]["temperature"] == 0.2
    assert "maxTokens" not in sent["overrideConfig"]
    warnings = (completion.model_extra or {})["flywheel"]["warnings"]
    assert warnings == [  # the door's, then the flow's
        "System and developer messages are not sent: a flow keeps its own prompt.",
        "Not passed to flows, which do not take them: top_p.",
        "max_tokens was not applied: flow 'reviewer' on fw does not let callers override it "
        "(its API configuration's Override Config).",
    ]
    await sync_to_async(drain)()


async def test_a_streamed_completion_comes_in_openai_chunks(world: World, raw_api_key: str) -> None:
    world.fw_route.mock(return_value=response("flowise", "prediction_agentflow_stream"))
    stream = await async_client(raw_api_key).chat.completions.create(
        model="flywheel",
        messages=[{"role": "user", "content": REVIEW}],
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = [chunk async for chunk in stream]

    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == FW_ANSWER
    assert chunks[0].choices[0].delta.role == "assistant"
    finished = [c for c in chunks if c.choices and c.choices[0].finish_reason]
    assert [c.choices[0].finish_reason for c in finished] == ["stop"]
    assert (finished[0].model_extra or {})["flywheel"]["backend"] == "fw"
    assert chunks[-1].choices == []  # the usage chunk, asked for
    assert len({c.id for c in chunks}) == 1
    await sync_to_async(drain)()


def test_every_flow_the_key_may_run_is_a_model_and_runs_that_flow(
    world: World, raw_api_key: str
) -> None:
    client = sync_client(raw_api_key)
    listed = [m.id for m in client.models.list()]

    assert listed == ["flywheel", "fw/reviewer", "lf/anything", "lf/echo"]
    completion = client.chat.completions.create(
        model="lf/echo", messages=[{"role": "user", "content": REVIEW}]
    )
    flywheel = (completion.model_extra or {})["flywheel"]
    assert (flywheel["backend"], flywheel["flow"]) == ("lf", "echo")
    assert completion.model == "lf/echo"
    drain()


@pytest.mark.parametrize(
    ("fields", "param"),
    [
        ({"tools": [{"type": "function", "function": {"name": "f"}}]}, "tools"),
        ({"n": 2}, "n"),
        ({"temperature": 3}, "temperature"),
        ({"messages": [{"role": "assistant", "content": "hi"}]}, "messages"),
        ({"messages": [{"role": "tool", "content": "x", "tool_call_id": "1"}]}, "messages"),
        ({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]}, "messages"),
    ],
)
def test_what_flywheel_cannot_serve_is_refused_in_openais_shape(
    world: World, raw_api_key: str, fields: dict[str, Any], param: str
) -> None:
    body = {"model": "flywheel", "messages": [{"role": "user", "content": REVIEW}], **fields}
    with pytest.raises(openai.BadRequestError) as refused:
        sync_client(raw_api_key).chat.completions.create(**body)

    error = cast(dict[str, Any], refused.value.body)
    assert error["type"] == "invalid_request_error"
    assert error["param"] == param
    assert error["code"] == "ValidationError"
    assert world.fw_route.calls.call_count == 0


def test_an_unknown_model_and_a_bad_key_are_refused_as_openai_refuses_them(
    world: World, raw_api_key: str
) -> None:
    with pytest.raises(openai.NotFoundError) as unknown:
        sync_client(raw_api_key).chat.completions.create(
            model="gpt-4o", messages=[{"role": "user", "content": REVIEW}]
        )
    with pytest.raises(openai.AuthenticationError) as bad_key:
        sync_client("fw_00000000_not-a-key").models.list()

    assert cast(dict[str, Any], unknown.value.body)["code"] == "model_not_found"
    assert "GET /v1/models" in unknown.value.message
    assert cast(dict[str, Any], bad_key.value.body)["code"] == "invalid_api_key"


def test_langchains_chat_model_talks_to_flywheel(world: World, raw_api_key: str) -> None:
    chat = ChatOpenAI(
        model="flywheel",
        base_url=BASE_URL,
        api_key=raw_api_key,  # type: ignore[arg-type]
        http_client=httpx2.Client(transport=AsgiSync()),
    )

    answer = chat.invoke(REVIEW)

    assert answer.content == FW_ANSWER
    drain()


async def test_langchains_async_stream_talks_to_flywheel(world: World, raw_api_key: str) -> None:
    world.fw_route.mock(return_value=response("flowise", "prediction_agentflow_stream"))
    chat = ChatOpenAI(
        model="flywheel",
        base_url=BASE_URL,
        api_key=raw_api_key,  # type: ignore[arg-type]
        http_async_client=httpx2.AsyncClient(transport=_asgi()),
    )

    parts = [part.content async for part in chat.astream(REVIEW)]

    assert "".join(str(p) for p in parts) == FW_ANSWER
    decisions = await db(RoutingDecision.objects.count)()
    await sync_to_async(drain)()
    assert decisions <= 1

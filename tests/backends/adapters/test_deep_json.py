"""JSON nested too deeply to read is a backend's fault, never Flywheel's crash.

Python's json module recurses, so a backend answering ``[[[[...]]]]`` a few thousand
levels deep raised RecursionError out of the adapter: a 500 on the chatflow doors and
on a question. Every JSON read of what a backend sends now takes it as "not JSON".
Replies are captured Flowise 3.1.4 and Langflow 1.13 ones, with one part made deep.
"""

from __future__ import annotations

import json
from collections.abc import Callable

import httpx
import pytest

from backends.adapters.base import BackendConfig, FlowBackend
from backends.adapters.flowise import FlowiseBackend
from backends.adapters.langflow import LangflowBackend
from backends.errors import BackendUnexpectedError
from tests.captured import body, response
from tests.httpx_transport import HttpxTransport

DEEP = "[" * 100_000 + "]" * 100_000

Handler = Callable[[httpx.Request], httpx.Response]


def _adapter(cls: type[FlowBackend], handler: Handler) -> FlowBackend:
    config = BackendConfig(id=1, name="deep", kind=cls.kind, base_url="http://deep.test")
    return cls.build(config, transport=HttpxTransport(httpx.MockTransport(handler)))


def _answer(content: str, content_type: str = "application/json", status: int = 200) -> Handler:
    headers = {"content-type": content_type}
    return lambda request: httpx.Response(status, content=content.encode(), headers=headers)


@pytest.mark.parametrize("cls", [FlowiseBackend, LangflowBackend])
async def test_a_whole_answer_nested_too_deeply_is_a_backend_error(
    cls: type[FlowBackend],
) -> None:
    with pytest.raises(BackendUnexpectedError) as got:
        await _adapter(cls, _answer(DEEP)).get_flow("f-1")
    with pytest.raises(BackendUnexpectedError):
        await _adapter(cls, _answer(DEEP)).discover_flows()
    with pytest.raises(BackendUnexpectedError):
        await _adapter(cls, _answer(DEEP)).execute_flow("f-1", "q")

    assert got.value.details["backend"] == "deep"


async def test_flowise_flow_data_nested_too_deeply_is_kept_as_the_servers_string() -> None:
    record = {**body("flowise", "chatflow_get"), "flowData": DEEP}

    got = await _adapter(FlowiseBackend, _answer(json.dumps(record))).get_flow("f-1")

    assert got.flow_data == DEEP  # as any flowData that is not JSON


async def test_a_langflow_error_whose_detail_is_nested_too_deeply_is_still_typed() -> None:
    reply = json.dumps({"detail": DEEP})

    with pytest.raises(BackendUnexpectedError) as raised:
        await _adapter(LangflowBackend, _answer(reply, status=500)).execute_flow("f-1", "q")

    assert raised.value.http_status == 500


async def test_a_flowise_stream_event_nested_too_deeply_is_passed_over() -> None:
    captured = response("flowise", "prediction_agentflow_stream").text
    stream = f"message:\ndata:{DEEP}\n\n" + captured

    events = [
        e
        async for e in _adapter(FlowiseBackend, _answer(stream, "text/event-stream")).stream_flow(
            "f-1", "q"
        )
    ]

    assert [e.type for e in events] == ["chunk", "end"]
    assert events[-1].text == "Echo: hello flowise"


async def test_a_langflow_stream_event_nested_too_deeply_is_passed_over() -> None:
    captured = response("langflow", "run_stream").text
    stream = DEEP + "\n\n" + captured

    events = [
        e
        async for e in _adapter(LangflowBackend, _answer(stream, "text/event-stream")).stream_flow(
            "f-1", "q"
        )
    ]

    assert [e.type for e in events] == ["chunk", "end"]

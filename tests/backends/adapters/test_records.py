"""A flow record Flywheel cannot keep or show is refused by name, for every kind.

Records captured from a real Flowise 3.1.4 and Langflow 1.13, with one field changed
to what a tenant's backend may hold: longer than the Flow row's column, a NUL
character, a lone surrogate, a description or a flowData past its byte limit.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from django.test import override_settings

from backends.adapters.base import BackendConfig, FlowBackend
from backends.adapters.flowise import FlowiseBackend
from backends.adapters.langflow import LangflowBackend
from backends.errors import BackendUnexpectedError
from tests.captured import body
from tests.httpx_transport import HttpxTransport
from tests.paths import ROOT

FLOWISE_RECORD = body("flowise", "chatflow_get")
LANGFLOW_RECORD = body("langflow", "flow_get")
KIB = 1024

Handler = Callable[[httpx.Request], httpx.Response]


def _adapter(cls: type[FlowBackend], handler: Handler) -> FlowBackend:
    config = BackendConfig(id=1, name="odd", kind=cls.kind, base_url="http://odd.test")
    return cls.build(config, transport=HttpxTransport(httpx.MockTransport(handler)))


def _json(payload: Any) -> httpx.Response:
    """A JSON answer as a server writes it: a lone surrogate escaped (``\\ud800``)."""
    content = json.dumps(payload).encode()
    return httpx.Response(200, content=content, headers={"content-type": "application/json"})


def _answering(record: dict[str, Any]) -> Handler:
    return lambda request: _json(record)


# Each: a change to the captured record, the field Flywheel names, how it fails.
FLOWISE_ODDITIES = [
    ({"name": "n" * 301}, "name", "too_large"),
    ({"name": "a\x00b"}, "name", "not_text"),
    ({"name": "lone \ud800"}, "name", "not_text"),
    ({"id": "i" * 201}, "id", "too_large"),
    ({"id": "a\x00b"}, "id", "not_text"),
    ({"id": ""}, "id", "blank"),
    ({"id": "../../api/v1/apikey"}, "id", "not_an_id"),  # it would leave the URL's path
    ({"id": "f?x=1"}, "id", "not_an_id"),
    ({"type": "T" * 31}, "type", "too_large"),
    ({"category": "d" * (64 * KIB + 1)}, "description", "too_large"),
    ({"category": "\x00"}, "description", "not_text"),
    ({"updatedDate": "2026-11-22\x00"}, "updatedDate", "not_text"),
    ({"createdDate": "9" * (64 * KIB + 1)}, "createdDate", "too_large"),
    ({"flowData": "not json \ud800"}, "flowData", "not_text"),
]
LANGFLOW_ODDITIES = [
    ({"name": "n" * 301}, "name", "too_large"),
    ({"name": "a\x00b"}, "name", "not_text"),
    ({"id": "i" * 201}, "id", "too_large"),
    ({"id": "a/b"}, "id", "not_an_id"),
    ({"description": "lone \udfff"}, "description", "not_text"),
    ({"description": "d" * (64 * KIB + 1)}, "description", "too_large"),
    ({"endpoint_name": "e" * 301}, "endpoint_name", "too_large"),
    ({"flow_type": "w" * 31}, "type", "too_large"),
    ({"updated_at": "\x00"}, "updatedDate", "not_text"),
]
CASES = [(FlowiseBackend, FLOWISE_RECORD, *case) for case in FLOWISE_ODDITIES] + [
    (LangflowBackend, LANGFLOW_RECORD, *case) for case in LANGFLOW_ODDITIES
]


@pytest.mark.parametrize(("cls", "record", "change", "field", "failure"), CASES)
async def test_a_record_that_does_not_fit_is_a_502_naming_the_backend_and_the_field(
    cls: type[FlowBackend], record: dict, change: dict, field: str, failure: str
) -> None:
    with pytest.raises(BackendUnexpectedError) as raised:
        await _adapter(cls, _answering({**record, **change})).get_flow("f-1")

    error = raised.value.as_dict()["error"]
    assert raised.value.status_code == 502
    assert error["type"] == "UnexpectedError"
    assert error["details"]["backend"] == "odd"
    assert error["details"]["field"] == field
    assert error["details"]["failure"] == failure
    assert f"{cls.label} backend 'odd'" in error["message"]
    assert f"its {field} " in error["message"]
    assert "\x00" not in json.dumps(error)


async def test_the_limit_is_said_with_the_refusal() -> None:
    long_name = {**FLOWISE_RECORD, "name": "n" * 301}
    big = {**FLOWISE_RECORD, "category": "d" * (64 * KIB + 1)}

    with pytest.raises(BackendUnexpectedError) as by_chars:
        await _adapter(FlowiseBackend, _answering(long_name)).get_flow("f-1")
    with pytest.raises(BackendUnexpectedError) as by_bytes:
        await _adapter(FlowiseBackend, _answering(big)).get_flow("f-1")

    assert by_chars.value.details["limit_chars"] == 300
    assert by_chars.value.details["flow"] == FLOWISE_RECORD["id"]
    assert by_bytes.value.details["limit_bytes"] == 64 * KIB
    assert by_bytes.value.details["setting"] == "FLYWHEEL_RECORD_FIELD_MAX_BYTES"


async def test_a_record_at_every_limit_is_taken() -> None:
    edge = {
        **FLOWISE_RECORD,
        "id": "i" * 200,
        "name": "n" * 300,
        "type": "T" * 30,
        "category": "é" * (32 * KIB),  # two bytes each: 64 KiB exactly
    }

    record = await _adapter(FlowiseBackend, _answering(edge)).get_flow("f-1")

    assert (len(record.id), len(record.name), len(record.type)) == (200, 300, 30)
    assert record.discovered.description == edge["category"]


async def test_flow_data_past_its_limit_is_refused_and_the_largest_captured_flow_is_not() -> None:
    # The largest flow captured from the peers (two LLM components in Langflow) is
    # about 64 kB of JSON; a flow Flywheel accepts on create may be 1 MB.
    peer = json.loads((ROOT / "tests/peers/langflow-fake-llm-x2-flow.json").read_text())
    largest = {**LANGFLOW_RECORD, "data": peer["data"]}

    taken = await _adapter(LangflowBackend, _answering(largest)).get_flow("f-1")
    with (
        override_settings(FLOW_DATA_MAX_BYTES=4 * KIB),
        pytest.raises(BackendUnexpectedError) as raised,
    ):
        await _adapter(FlowiseBackend, _answering(FLOWISE_RECORD)).get_flow("f-1")

    assert taken.flow_data == peer["data"]
    assert raised.value.details["field"] == "flowData"
    assert raised.value.details["limit_bytes"] == 4 * KIB
    assert raised.value.details["setting"] == "FLYWHEEL_FLOW_DATA_MAX_BYTES"


async def test_what_a_write_answers_is_held_to_the_same_check() -> None:
    adapter = _adapter(FlowiseBackend, _answering({**FLOWISE_RECORD, "name": "n" * 301}))
    flow = json.loads(FLOWISE_RECORD["flowData"])

    with pytest.raises(BackendUnexpectedError) as created:
        await adapter.create_flow(name="ok", flow_data=flow)
    with pytest.raises(BackendUnexpectedError) as updated:
        await adapter.update_flow("f-1", name="ok")
    with pytest.raises(BackendUnexpectedError) as deployed:
        await adapter.deploy_flow("f-1")

    assert {e.value.details["field"] for e in (created, updated, deployed)} == {"name"}


# --- discovery: a bad record is skipped and counted, the others are discovered ------------


async def test_discovery_skips_a_bad_record_with_a_warning_and_keeps_the_rest(
    caplog: pytest.LogCaptureFixture,
) -> None:
    listed = body("flowise", "chatflows_page1")["data"][0]
    records = [
        {**listed, "id": "good-1"},
        {**listed, "id": "bad-name", "name": "n" * 400},
        {**listed, "id": "i" * 300},
        {**listed, "id": "good-2", "category": "nul \x00"},
        {**listed, "id": "good-3"},
    ]

    def handle(request: httpx.Request) -> httpx.Response:
        return _json({"data": records, "total": len(records)})

    with caplog.at_level(logging.WARNING):
        found = await _adapter(FlowiseBackend, handle).discover_flows()

    assert [f.external_id for f in found.flows] == ["good-1", "good-3"]
    assert [(p.flow, p.field, p.failure) for p in found.skipped] == [
        ("bad-name", "name", "too_large"),
        ("", "id", "too_large"),  # an id that does not fit is not repeated
        ("good-2", "description", "not_text"),
    ]
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 3
    assert all("'odd'" in w for w in warnings)
    assert "its name is longer than 300 characters" in warnings[0]
    assert "i" * 201 not in " ".join(warnings)
    assert "\x00" not in " ".join(warnings)


async def test_langflow_discovery_skips_a_bad_record_too() -> None:
    item = body("langflow", "flows_page1")["items"][0]
    items = [{**item, "id": "ok"}, {**item, "id": "odd", "endpoint_name": "e" * 301}]

    def handle(request: httpx.Request) -> httpx.Response:
        return _json({"items": items, "total": 2, "page": 1, "size": 100, "pages": 1})

    found = await _adapter(LangflowBackend, handle).discover_flows()

    assert [f.external_id for f in found.flows] == ["ok"]
    assert [(p.flow, p.field) for p in found.skipped] == [("odd", "endpoint_name")]

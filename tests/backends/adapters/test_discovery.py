"""Discovery is bounded, for every kind: a backend's list cannot loop it or fill its memory.

The servers stand in with records captured from a real Flowise 3.1.4 and Langflow 1.13,
multiplied under new ids, and page metadata that lies (``total`` or ``pages`` of a
billion), as the backend in the issue did: it made discovery ask for 22,164 pages.
"""

from __future__ import annotations

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

FLOWISE_RECORD = body("flowise", "chatflows_page1")["data"][0]
LANGFLOW_ITEM = body("langflow", "flows_page1")["items"][0]
A_BILLION = 1_000_000_000
PAGE = 100  # both adapters ask for 100 flows a page
ASKED_AT_MOST = 300  # a discovery that asks more has not stopped: the test fails

Handler = Callable[[httpx.Request], httpx.Response]


def _flowise_page(records: list[dict[str, Any]], page: int) -> httpx.Response:
    return httpx.Response(200, json={"data": records, "total": A_BILLION})


def _langflow_page(items: list[dict[str, Any]], page: int) -> httpx.Response:
    meta = {"total": A_BILLION, "page": page, "size": PAGE, "pages": A_BILLION // PAGE}
    return httpx.Response(200, json={"items": items, **meta})


KINDS = {
    "flowise": (FlowiseBackend, FLOWISE_RECORD, _flowise_page),
    "langflow": (LangflowBackend, LANGFLOW_ITEM, _langflow_page),
}


def _adapter(kind: str, handler: Handler) -> FlowBackend:
    cls = KINDS[kind][0]
    config = BackendConfig(id=1, name="endless", kind=kind, base_url=f"http://{kind}.test")
    return cls.build(config, transport=HttpxTransport(httpx.MockTransport(handler)))


def _endless(kind: str, sent: list[httpx.Request], *, same_page: bool = False) -> Handler:
    """A server whose list never ends: 100 new flows on every page (``same_page``: the
    same 100 on every page, the page asked for ignored), and a billion promised."""
    _, record, page_of = KINDS[kind]

    def handle(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        if len(sent) > ASKED_AT_MOST:
            raise AssertionError(f"discovery asked for {len(sent)} pages and did not stop")
        page = 1 if same_page else int(request.url.params["page"])
        records = [
            {**record, "id": f"flow-{page}-{i}", "name": f"flow {page}-{i}"} for i in range(PAGE)
        ]
        return page_of(records, page)

    return handle


@pytest.mark.parametrize("kind", KINDS)
async def test_at_the_default_page_limit_discovery_stops_asking_and_fails_naming_it(
    kind: str,
) -> None:
    sent: list[httpx.Request] = []

    with pytest.raises(BackendUnexpectedError) as raised:
        await _adapter(kind, _endless(kind, sent)).discover_flows()

    error = raised.value.as_dict()["error"]
    assert len(sent) == 100
    assert raised.value.status_code == 502
    assert error["details"] == {
        "backend": "endless",
        "failure": "too_large",
        "limit_pages": 100,
        "setting": "FLYWHEEL_DISCOVERY_MAX_PAGES",
    }
    assert "'endless'" in error["message"]
    assert "100 pages" in error["message"]
    assert "FLYWHEEL_DISCOVERY_MAX_PAGES" in error["message"]


@pytest.mark.parametrize("kind", KINDS)
async def test_past_the_flow_limit_discovery_stops_asking_and_fails_naming_it(kind: str) -> None:
    sent: list[httpx.Request] = []

    with (
        override_settings(DISCOVERY_MAX_FLOWS=250),
        pytest.raises(BackendUnexpectedError) as raised,
    ):
        await _adapter(kind, _endless(kind, sent)).discover_flows()

    assert len(sent) == 3  # 300 flows listed: past 250 on the third page
    assert raised.value.details == {
        "backend": "endless",
        "failure": "too_large",
        "limit_flows": 250,
        "setting": "FLYWHEEL_DISCOVERY_MAX_FLOWS",
    }
    assert "250 flows" in raised.value.message


@pytest.mark.parametrize("kind", KINDS)
async def test_at_the_flow_limit_no_further_page_is_asked_for(kind: str) -> None:
    sent: list[httpx.Request] = []

    with (
        override_settings(DISCOVERY_MAX_FLOWS=200),
        pytest.raises(BackendUnexpectedError) as raised,
    ):
        await _adapter(kind, _endless(kind, sent)).discover_flows()

    assert len(sent) == 2  # it holds 200 and the server says there are more
    assert raised.value.details["limit_flows"] == 200


@pytest.mark.parametrize("kind", KINDS)
async def test_a_page_that_brings_no_new_flow_ends_the_list_whatever_it_promised(
    kind: str,
) -> None:
    sent: list[httpx.Request] = []

    found = await _adapter(kind, _endless(kind, sent, same_page=True)).discover_flows()

    assert len(sent) == 2
    assert len(found.flows) == PAGE
    assert len({f.external_id for f in found.flows}) == PAGE


@pytest.mark.parametrize("kind", KINDS)
async def test_a_flow_listed_twice_is_discovered_once(kind: str) -> None:
    record = KINDS[kind][1]
    twice = [{**record, "id": "same"}, {**record, "id": "same", "name": "again"}]
    pages = {
        "flowise": {"data": twice, "total": 2},
        "langflow": {"items": twice, "total": 2, "page": 1, "size": PAGE, "pages": 1},
    }

    def handle(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json=pages[kind])

    found = await _adapter(kind, handle).discover_flows()

    assert [f.external_id for f in found.flows] == ["same"]
    assert found.flows[0].name == record["name"]  # the first listing wins


async def test_a_flowise_that_does_not_paginate_is_held_to_the_flow_limit() -> None:
    records = [{**FLOWISE_RECORD, "id": f"flow-{i}"} for i in range(30)]
    sent: list[httpx.Request] = []

    def handle(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        return httpx.Response(200, json=records)  # the whole list, not a page

    with (
        override_settings(DISCOVERY_MAX_FLOWS=20),
        pytest.raises(BackendUnexpectedError) as raised,
    ):
        await _adapter("flowise", handle).discover_flows()

    assert len(sent) == 1
    assert raised.value.details["limit_flows"] == 20


async def test_flows_within_the_limits_are_all_discovered() -> None:
    records = [{**FLOWISE_RECORD, "id": f"flow-{i}"} for i in range(250)]

    def handle(request: httpx.Request) -> httpx.Response:
        page, limit = int(request.url.params["page"]), int(request.url.params["limit"])
        chunk = records[(page - 1) * limit : page * limit]
        return httpx.Response(200, json={"data": chunk, "total": len(records)})

    with override_settings(DISCOVERY_MAX_FLOWS=250, DISCOVERY_MAX_PAGES=3):
        found = await _adapter("flowise", handle).discover_flows()

    assert len(found.flows) == 250
    assert found.skipped == ()

"""A third backend kind for tests, written as a module of backends/adapters/ would be.

"fake" is a small JSON server that keeps flows by id and answers runs; it has
no flow types, no deployment step and no generator. FakeServer stands in for
it in memory (behind respx), so what the adapter sends is what a server gets.
Registering the kind is tests/test_third_kind.py's business.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

import httpx

from backends.adapters.base import (
    UNTYPED,
    Exchange,
    ExecutionResult,
    FlowBackend,
    HealthResult,
    StreamEvent,
    timestamp,
)
from backends.adapters.discovery import FlowsPage
from backends.adapters.records import DiscoveredFlow, FlowRecord
from backends.errors import (
    BackendAuthenticationError,
    BackendError,
    BackendNotFoundError,
    BackendUnexpectedError,
    BackendValidationError,
)
from backends.http import Response, json_body, ms_since, unreadable

KIND = "fake"
KEY = "sk-FAKE-SECRET"
REVIEWER = "fk-1"  # the flow the server starts with


def _discovered(item: Mapping[str, Any]) -> DiscoveredFlow:
    return DiscoveredFlow(
        external_id=str(item["id"]),
        name=str(item.get("title") or item["id"]),
        description=str(item.get("about") or ""),
    )


def _record(item: Mapping[str, Any]) -> FlowRecord:
    return FlowRecord(
        id=str(item["id"]),
        name=str(item.get("title") or ""),
        type=UNTYPED,
        deployed=True,
        description=str(item.get("about") or ""),
        created=None,
        updated=timestamp(item.get("changed")),
        flow_data=item.get("graph"),
        discovered=_discovered(item),
    )


# --- the adapter --------------------------------------------------------------------------


class FakeBackend(FlowBackend):
    """A server that keeps flows by id and answers runs; no types, deployment or generator."""

    kind = KIND
    label = "Fake"

    @staticmethod
    def map_error(response: Response, backend: str) -> BackendError:
        status = response.status_code
        text = f"Fake backend {backend!r} refused (HTTP {status})."
        args: dict[str, Any] = {"backend": backend, "http_status": status}
        if status in {401, 403}:
            return BackendAuthenticationError(text, **args)
        if status == 404:
            return BackendNotFoundError(text, **args)
        if status in {400, 422}:
            return BackendValidationError(text, **args)
        return BackendUnexpectedError(text, **args)

    @staticmethod
    def auth_headers(api_key: str) -> dict[str, str]:
        return {"X-Fake-Key": api_key}

    async def health_check(self) -> HealthResult:
        started = time.perf_counter()
        try:
            response = await self.http.request("GET", "/ping", retry=False, timeout=5.0)
        except BackendError as err:
            return HealthResult(False, ms_since(started), err.message)
        ok = json_body(response, self.config.name) == {"ok": True}
        return HealthResult(ok, ms_since(started), "" if ok else "unexpected ping answer")

    async def _flows_page(self, number: int) -> FlowsPage:
        # This server does not paginate: its whole list is page 1, the last.
        response = await self.http.request("GET", "/flows")
        return FlowsPage([_discovered(item) for item in self._body(response)["flows"]], last=True)

    async def execute_flow(
        self,
        flow_id: str,
        question: str,
        *,
        session_id: str | None = None,
        parameters: Mapping[str, Any] | None = None,
        history: Sequence[Exchange] = (),
    ) -> ExecutionResult:
        response = await self.http.request(
            "POST", f"/flows/{flow_id}/run", json={"input": question, "conversation": session_id}
        )
        body = self._body(response)
        return ExecutionResult(text=str(body["answer"]), session_id=str(body["conversation"]))

    async def stream_flow(
        self,
        flow_id: str,
        question: str,
        *,
        session_id: str | None = None,
        parameters: Mapping[str, Any] | None = None,
        history: Sequence[Exchange] = (),
    ) -> AsyncIterator[StreamEvent]:
        # This server does not stream: the whole answer is one chunk.
        result = await self.execute_flow(flow_id, question, session_id=session_id)
        yield StreamEvent("chunk", result.text)
        yield StreamEvent("end", result.text, result.session_id)

    async def _list_flows(self) -> list[FlowRecord]:
        response = await self.http.request("GET", "/flows")
        return [_record(item) for item in self._body(response)["flows"]]

    async def _get_flow(self, flow_id: str) -> FlowRecord:
        return _record(self._body(await self.http.request("GET", f"/flows/{flow_id}")))

    async def _create_flow(
        self, *, name: str, flow_data: Mapping[str, Any], flow_type: str, deployed: bool | None
    ) -> FlowRecord:
        sent = {"title": name, "graph": dict(flow_data)}
        return _record(self._body(await self.http.request("POST", "/flows", json=sent)))

    async def _update_flow(
        self,
        flow_id: str,
        *,
        name: str | None,
        flow_data: Mapping[str, Any] | None,
        description: str | None,
        deployed: bool | None,
    ) -> FlowRecord:
        given = {"title": name, "graph": flow_data, "about": description}
        sent = {k: v for k, v in given.items() if v is not None}
        response = await self.http.request("PATCH", f"/flows/{flow_id}", json=sent)
        return _record(self._body(response))

    async def delete_flow(self, flow_id: str) -> None:
        await self.http.request("DELETE", f"/flows/{flow_id}", retry=False)

    def _body(self, response: Response) -> dict[str, Any]:
        body = json_body(response, self.config.name)
        if not isinstance(body, dict):
            raise unreadable("Fake", self.config.name, "reply", response)
        return body


# --- its server, in memory ---------------------------------------------------------------


class FakeServer:
    """The fake kind's server: it keeps the flows it is sent and answers runs."""

    def __init__(self) -> None:
        self.flows: dict[str, dict[str, Any]] = {
            REVIEWER: {"id": REVIEWER, "title": "Code review helper", "about": "", "graph": {}}
        }
        self.requests: list[httpx.Request] = []

    def handle(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        if request.headers.get("x-fake-key") != KEY:
            return httpx.Response(401, json={"error": "bad key"})
        sent = json.loads(request.content) if request.content else {}
        match request.method, request.url.path.strip("/").split("/"):
            case "GET", ["ping"]:
                return httpx.Response(200, json={"ok": True})
            case "GET", ["flows"]:
                return httpx.Response(200, json={"flows": list(self.flows.values())})
            case "POST", ["flows"]:
                flow = {"id": f"fk-{len(self.flows) + 1}", "about": "", **sent}
                self.flows[flow["id"]] = flow
                return httpx.Response(201, json=flow)
            case _, ["flows", flow_id, *_] if flow_id not in self.flows:
                return httpx.Response(404, json={"error": "no such flow"})
            case "GET", ["flows", flow_id]:
                return httpx.Response(200, json=self.flows[flow_id])
            case "PATCH", ["flows", flow_id]:
                self.flows[flow_id].update(sent, changed="2026-01-02T03:04:05Z")
                return httpx.Response(200, json=self.flows[flow_id])
            case "DELETE", ["flows", flow_id]:
                del self.flows[flow_id]
                return httpx.Response(204)
            case "POST", ["flows", flow_id, "run"]:
                answer = {"answer": f"fake: {sent['input']}", "conversation": "conv-1"}
                return httpx.Response(200, json=answer)
        return httpx.Response(404, json={"error": "no such route"})

"""Langflow 1.x adapter.

Quirks it survives (see the peers notes): a missing key is a 403, not a 401;
run errors are a 500 whose ``detail`` is itself a JSON string; a streamed run
is blank-line-separated bare JSON objects, not SSE, and a failing stream is a
200 carrying ``error`` events; the session id defaults to the flow id;
``GET /api/v1/flows/`` paginates only with ``get_all=false``.

Token usage is read in langflow_usage.py, beside this module.
"""

from __future__ import annotations

import re
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

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
from backends.adapters.langflow_usage import run_usage
from backends.adapters.records import DiscoveredFlow, FlowRecord
from backends.adapters.traits import Tunable, as_tweaks, langflow_tunable, node_kinds
from backends.errors import (
    BackendAuthenticationError,
    BackendError,
    BackendNotFoundError,
    BackendRateLimitError,
    BackendUnexpectedError,
    BackendValidationError,
)
from backends.http import Response, describe, json_body, loads, ms_since, unreadable
from backends.http.limits import PROBE_BYTES, answer_bytes

PAGE_SIZE = 100  # Langflow's maximum page size
# A health key worth naming in a failed probe; anything else is only counted.
_HEALTH_KEY = re.compile(r"[A-Za-z0-9_.-]{1,40}")


def error_message(detail: Any) -> str:
    """Langflow's ``detail``: a string, a JSON string holding ``{"message"}``, or a list;
    "" for anything else."""
    if isinstance(detail, str):
        try:
            inner = loads(detail)
        except ValueError:
            return detail
        if isinstance(inner, dict) and inner.get("message"):
            return str(inner["message"])
        return detail
    if isinstance(detail, list):  # FastAPI validation errors
        return "; ".join(
            f"{'.'.join(str(p) for p in item['loc'])}: {item.get('msg', '')}"
            for item in detail
            if isinstance(item, dict) and isinstance(item.get("loc"), list)
        )
    if isinstance(detail, dict) and isinstance(detail.get("message"), str):
        return str(detail["message"])
    return ""


def map_error(response: Response, backend: str) -> BackendError:
    """Turn a Langflow error response into the right typed error.

    The message is Langflow's own ``detail``, else Flywheel's description of
    the reply: a body that is not a Langflow error is never repeated.
    """
    status = response.status_code
    try:
        body = response.json()
    except ValueError:
        body = None
    detail = body.get("detail") if isinstance(body, dict) else None
    message = (error_message(detail) if detail is not None else "") or describe(response)
    args: dict[str, Any] = {"backend": backend, "http_status": status}
    text = f"Langflow backend {backend!r}: {message}"
    if status in {401, 403}:
        return BackendAuthenticationError(text, **args)
    if status == 429:
        return BackendRateLimitError(text, **args)
    if status == 404:
        return BackendNotFoundError(text, **args)
    if status in {400, 409, 422}:
        return BackendValidationError(text, **args)
    if status == 500 and "has no data" in message:
        return BackendValidationError(text, **args)
    return BackendUnexpectedError(text, **args)


def with_history(question: str, history: Sequence[Exchange]) -> str:
    """Langflow's run API takes no history: earlier exchanges travel in the input text."""
    if not history:
        return question
    lines = [f"User: {e.question}\nAssistant: {e.answer}" for e in history]
    return "Conversation so far:\n" + "\n".join(lines) + f"\n\nUser: {question}"


def run_body(
    question: str,
    session_id: str | None,
    parameters: Mapping[str, Any] | None,
    history: Sequence[Exchange] = (),
) -> dict[str, Any]:
    """The run request: ``tweaks`` pass through; a session id is sent only when given."""
    body: dict[str, Any] = {
        "input_value": with_history(question, history),
        "input_type": "chat",
        "output_type": "chat",
    }
    if session_id:
        body["session_id"] = session_id
    tweaks = (parameters or {}).get("tweaks")
    if tweaks:
        body["tweaks"] = dict(tweaks)
    return body


def answer_text(run_response: Mapping[str, Any]) -> str:
    """The answer of a run: ``outputs[0].outputs[0].results.message.text``."""
    try:
        result = run_response["outputs"][0]["outputs"][0]
    except (KeyError, IndexError, TypeError):
        return ""
    message = (result.get("results") or {}).get("message") or {}
    if isinstance(message, dict) and message.get("text") is not None:
        return str(message["text"])
    messages = result.get("messages") or []
    return str(messages[0].get("message", "")) if messages else ""


class LangflowBackend(FlowBackend):
    kind = "langflow"
    label = "Langflow"

    untuned_reason = "has no model component that takes it"

    @classmethod
    def tuned(cls, parameters: Mapping[str, Any] | None, tunable: Tunable) -> dict[str, Any]:
        """Temperature and max_tokens become tweaks of the components that take them."""
        return as_tweaks(parameters, tunable)

    # No flow types, no deployment step, no generator: the base class refuses those.

    map_error = staticmethod(map_error)

    @staticmethod
    def auth_headers(api_key: str) -> dict[str, str]:
        return {"x-api-key": api_key}

    # --- health and discovery -------------------------------------------------

    async def health_check(self) -> HealthResult:
        started = time.perf_counter()
        try:
            response = await self.http.request(
                "GET", "/health_check", retry=False, timeout=5.0, max_bytes=PROBE_BYTES
            )
            body = json_body(response, self.config.name)
        except BackendError as err:
            return HealthResult(False, ms_since(started), err.message)
        latency = ms_since(started)
        failure = self._health_failure(body, response)
        if failure:
            return HealthResult(False, latency, failure)
        return HealthResult(True, latency)

    def _health_failure(self, body: Any, response: Response) -> str:
        """What a health answer reports as failing, or "" when all is ok."""
        if not isinstance(body, dict):
            return f"unexpected health answer ({describe(response)})"
        failing = sorted(str(k) for k, v in body.items() if v != "ok")
        if not failing:
            return ""
        named = [k for k in failing if _HEALTH_KEY.fullmatch(k)][:5]
        more = len(failing) - len(named)
        listed = ", ".join(named) + (f" and {more} more" if more else "")
        return self.http.clean(f"health check reports not ok: {listed}")

    async def _flows_page(self, number: int) -> FlowsPage:
        response = await self.http.request(
            "GET",
            "/api/v1/flows/",
            params={
                "get_all": "false",
                "header_flows": "false",  # with each flow's data: its components
                "remove_example_flows": "true",
                "page": number,
                "size": PAGE_SIZE,
            },
        )
        body = json_body(response, self.config.name)
        try:
            items = body.get("items") or []
            flows = [discovered_flow(item) for item in items if not item.get("is_component")]
            components = [str(item["id"]) for item in items if item.get("is_component")]
            last = number >= int(body.get("pages") or 0) or not items
        except (AttributeError, KeyError, TypeError, ValueError) as err:
            raise unreadable("Langflow", self.config.name, "flow list", response) from err
        return FlowsPage(flows, last=last, others=components)

    # --- running flows ---------------------------------------------------------

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
            "POST",
            f"/api/v1/run/{flow_id}",
            params={"stream": "false"},
            json=run_body(question, session_id, parameters, history),
            max_bytes=answer_bytes(),
        )
        data = json_body(response, self.config.name)
        if not isinstance(data, dict):
            raise unreadable("Langflow", self.config.name, "answer", response)
        return ExecutionResult(
            text=answer_text(data),
            session_id=str(data.get("session_id") or ""),
            metadata={"outputs": len(data.get("outputs") or [])},
            usage=run_usage(data),
        )

    async def stream_flow(
        self,
        flow_id: str,
        question: str,
        *,
        session_id: str | None = None,
        parameters: Mapping[str, Any] | None = None,
        history: Sequence[Exchange] = (),
    ) -> AsyncIterator[StreamEvent]:
        parts: list[str] = []
        pending_error = ""
        async with self.http.stream(
            "POST",
            f"/api/v1/run/{flow_id}",
            params={"stream": "true"},
            json=run_body(question, session_id, parameters, history),
            max_bytes=answer_bytes(),
        ) as response:
            async for event, payload in _json_events(response):
                if event == "token":
                    chunk = str((payload or {}).get("chunk", ""))
                    if chunk:
                        parts.append(chunk)
                        yield StreamEvent("chunk", chunk)
                elif event == "error":
                    # A failing run sends the error as a chat message, then a final
                    # {"error": "500: {json}"}; the last one carries the full cause.
                    if isinstance(payload, dict) and isinstance(payload.get("error"), str):
                        raise self.http.clean_error(
                            _stream_error(payload["error"], self.config.name)
                        )
                    pending_error = str((payload or {}).get("text") or payload)
                elif event == "end":
                    result = (payload or {}).get("result") or {}
                    text = answer_text(result)
                    if not parts and text:
                        # No LLM streamed tokens: the answer arrives whole.
                        yield StreamEvent("chunk", text)
                    # The end event holds the whole run response, usage included (the
                    # add_message events carry it too, but may repeat one message).
                    yield StreamEvent(
                        "end",
                        text or "".join(parts),
                        str(result.get("session_id", "")),
                        usage=run_usage(result),
                    )
                    return
        if pending_error:
            raise self.http.clean_error(_stream_error(pending_error, self.config.name))
        raise BackendUnexpectedError(
            f"Langflow backend {self.config.name!r} ended the stream without an end event.",
            backend=self.config.name,
        )

    # --- managing flows ----------------------------------------------------------

    async def _list_flows(self) -> list[FlowRecord]:
        response = await self.http.request(
            "GET", "/api/v1/flows/", params={"get_all": "true", "remove_example_flows": "true"}
        )
        body = json_body(response, self.config.name)
        if not isinstance(body, list):
            raise unreadable("Langflow", self.config.name, "flow list", response)
        return [self._record(item, response) for item in body]

    async def _get_flow(self, flow_id: str) -> FlowRecord:
        response = await self.http.request("GET", f"/api/v1/flows/{flow_id}")
        return self._record(json_body(response, self.config.name), response)

    async def _create_flow(
        self, *, name: str, flow_data: Mapping[str, Any], flow_type: str, deployed: bool | None
    ) -> FlowRecord:
        # Langflow has no types and no deployment: create_flow refused any other ask.
        fields = {"name": name, "data": dict(flow_data)}
        response = await self.http.request("POST", "/api/v1/flows/", json=fields)
        return self._record(json_body(response, self.config.name), response)

    async def _update_flow(
        self,
        flow_id: str,
        *,
        name: str | None,
        flow_data: Mapping[str, Any] | None,
        description: str | None,
        deployed: bool | None,
    ) -> FlowRecord:
        given = {"name": name, "data": flow_data, "description": description}
        response = await self.http.request(
            "PATCH",
            f"/api/v1/flows/{flow_id}",
            json={k: v for k, v in given.items() if v is not None},
            retry=True,
        )
        return self._record(json_body(response, self.config.name), response)

    async def delete_flow(self, flow_id: str) -> None:
        await self.http.request("DELETE", f"/api/v1/flows/{flow_id}", retry=False)

    def _record(self, body: Any, response: Response) -> FlowRecord:
        try:
            return flow_record(body)
        except (AttributeError, KeyError, TypeError) as err:
            raise unreadable("Langflow", self.config.name, "flow", response) from err


def _stream_error(text: str, backend: str) -> BackendError:
    """An error inside a 200 stream: ``"500: {json}"`` or a message's text."""
    status, _, rest = text.partition(": ")
    message = error_message(rest) if status.isdigit() else text
    return BackendUnexpectedError(f"Langflow backend {backend!r}: {message}", backend=backend)


async def _json_events(response: Response) -> AsyncIterator[tuple[str, Any]]:
    """Langflow's stream: one bare JSON object per event, separated by blank lines."""
    async for line in response.aiter_lines():
        line = line.strip()
        if not line:
            continue
        try:
            event = loads(line)
        except ValueError:
            continue
        if isinstance(event, dict):
            yield str(event.get("event", "")), event.get("data")


def discovered_flow(item: Mapping[str, Any]) -> DiscoveredFlow:
    return DiscoveredFlow(
        external_id=str(item["id"]),
        name=str(item.get("name") or item["id"]),
        flow_type=str(item.get("flow_type") or UNTYPED).upper(),
        deployed=True,  # Langflow has no deployment step: every flow can run
        description=str(item.get("description") or ""),
        endpoint_name=str(item.get("endpoint_name") or ""),
        tunable=langflow_tunable(item.get("data")),
        node_kinds=node_kinds(item.get("data"), ("type",)),
    )


def flow_record(item: Mapping[str, Any]) -> FlowRecord:
    """A flow as every door shows it: Langflow's own ``flow_type`` is not a seed-003 type."""
    return FlowRecord(
        id=str(item["id"]),
        name=str(item.get("name") or ""),
        type=UNTYPED,
        deployed=True,
        description=str(item.get("description") or ""),
        created=None,
        updated=timestamp(item.get("updated_at")),
        flow_data=item.get("data"),
        discovered=discovered_flow(item),
    )

"""Flowise 3.x adapter.

Quirks it survives (see the peers notes): unknown routes answer 200 with the
UI's HTML page; deleting an unknown chatflow is a 500; a key-bound prediction
without the key is a 500 "Unauthorized"; the generator reports failure as a
200 with an ``error`` field; a top-level ``sessionId`` is ignored (it must go
inside ``overrideConfig``); a streaming request that fails before streaming
never answers (hence the read timeout); ``flowData`` travels as a JSON string.

Its records (JSON-string fields and all) are read in flowise_records.py, and token
usage in flowise_usage.py, beside this module.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

from backends.adapters.base import (
    Exchange,
    ExecutionResult,
    FlowBackend,
    HealthResult,
    StreamEvent,
    Usage,
)
from backends.adapters.discovery import FlowsPage
from backends.adapters.flowise_records import (
    decode_record,
    discovered_flow,
    encode_fields,
    flow_record,
)
from backends.adapters.flowise_usage import executed_data_usage, stream_usage, usage_metadata
from backends.adapters.records import DiscoveredFlow, FlowRecord
from backends.errors import (
    BackendAuthenticationError,
    BackendError,
    BackendNotFoundError,
    BackendRateLimitError,
    BackendUnexpectedError,
    BackendValidationError,
)
from backends.http import (
    Response,
    describe,
    json_body,
    loads,
    ms_since,
    reply_details,
    unreadable,
)
from backends.http.limits import PROBE_BYTES, answer_bytes

PAGE_SIZE = 100
CHATFLOW_TYPES = ("CHATFLOW", "AGENTFLOW", "MULTIAGENT", "ASSISTANT")
# Parameters with a conventional name that Flowise spells its own way.
_PARAMETER_NAMES = {"max_tokens": "maxTokens", "top_p": "topP"}


def map_error(response: Response, backend: str) -> BackendError:
    """Turn a Flowise error response into the right typed error."""
    status = response.status_code
    message = _error_message(response)
    args: dict[str, Any] = {"backend": backend, "http_status": status}
    text = f"Flowise backend {backend!r}: {message}"
    lowered = message.lower()
    if status in {401, 403} or (status == 500 and lowered.endswith("unauthorized")):
        return BackendAuthenticationError(text, **args)
    if status == 429:
        return BackendRateLimitError(text, **args)
    if status == 404 or "not found in the database" in lowered:
        return BackendNotFoundError(text, **args)
    if status in {400, 412, 422} or _is_bad_input(lowered):
        return BackendValidationError(text, **args)
    return BackendUnexpectedError(text, **args, details=reply_details(response))


def _error_message(response: Response) -> str:
    """Flowise's own error message (``message`` or ``error``), else Flywheel's description
    of the reply: a body that is not a Flowise error is never repeated."""
    try:
        body = response.json()
    except ValueError:
        return describe(response)
    if isinstance(body, dict):
        for key in ("message", "error"):
            if isinstance(body.get(key), str) and body[key]:
                return str(body[key])
    return describe(response)


def _is_bad_input(lowered_message: str) -> bool:
    # Flowise answers 500 for several kinds of bad input; their messages say so.
    markers = ("invalid chatflow", "is not valid json", "not null constraint", "invalid history")
    return any(marker in lowered_message for marker in markers)


def _json_or_not_found(response: Response, backend: str) -> Any:
    """Flowise answers unknown routes with 200 and its UI's HTML page: treat as not found."""
    if response.headers.get("content-type", "").startswith("text/html"):
        raise BackendNotFoundError(
            f"Flowise backend {backend!r} has no such route ({response.url.path}): "
            "it answered with its web page. Is it a different Flowise version?",
            backend=backend,
            http_status=response.status_code,
        )
    return json_body(response, backend)


# What a prediction says of Flowise's own records of it, kept with the answer.
MESSAGE_IDS = ("chatId", "chatMessageId", "questionMessageId", "executionId")


def prediction_body(
    question: str,
    session_id: str | None,
    parameters: Mapping[str, Any] | None,
    *,
    stream: bool,
    history: Sequence[Exchange] = (),
) -> dict[str, Any]:
    """The prediction request: parameters and the session id go into overrideConfig,
    earlier exchanges into Flowise's own ``history`` field."""
    override: dict[str, Any] = {}
    extra = dict(parameters or {})
    extra.pop("stream", None)
    for key, value in extra.items():
        override[_PARAMETER_NAMES.get(key, key)] = value
    if session_id:
        override["sessionId"] = session_id
    body: dict[str, Any] = {"question": question, "streaming": stream}
    if override:
        body["overrideConfig"] = override
    if history:
        body["history"] = [
            item
            for exchange in history
            for item in (
                {"role": "userMessage", "content": exchange.question},
                {"role": "apiMessage", "content": exchange.answer},
            )
        ]
    return body


class FlowiseBackend(FlowBackend):
    kind = "flowise"
    label = "Flowise"
    flow_types = CHATFLOW_TYPES
    deployable = True
    generates = True

    untuned_reason = "does not let callers override it (its API configuration's Override Config)"

    map_error = staticmethod(map_error)

    @staticmethod
    def auth_headers(api_key: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {api_key}"}

    # --- health and discovery -------------------------------------------------

    async def health_check(self) -> HealthResult:
        started = time.perf_counter()
        try:
            response = await self.http.request(
                "GET", "/api/v1/ping", retry=False, timeout=5.0, max_bytes=PROBE_BYTES
            )
        except BackendError as err:
            return HealthResult(False, ms_since(started), err.message)
        latency = ms_since(started)
        if response.text.strip() != "pong":
            return HealthResult(False, latency, f"unexpected ping answer ({describe(response)})")
        return HealthResult(True, latency)

    async def _flows_page(self, number: int) -> FlowsPage:
        response = await self.http.request(
            "GET", "/api/v1/chatflows", params={"page": number, "limit": PAGE_SIZE}
        )
        body = _json_or_not_found(response, self.config.name)
        if isinstance(body, list):  # a server that does not paginate sends everything
            return FlowsPage(self._discovered(body, response), last=True)
        if not isinstance(body, dict):
            raise unreadable("Flowise", self.config.name, "flow list", response)
        chunk = body.get("data") or []
        if not isinstance(chunk, list):
            raise unreadable("Flowise", self.config.name, "flow list", response)
        flows = self._discovered(chunk, response)
        return FlowsPage(flows, last=not chunk, total=_int(body.get("total")))

    def _discovered(self, records: list[Any], response: Response) -> list[DiscoveredFlow]:
        try:
            return [discovered_flow(record) for record in records]
        except (KeyError, TypeError) as err:
            raise unreadable("Flowise", self.config.name, "flow list", response) from err

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
        body = prediction_body(question, session_id, parameters, stream=False, history=history)
        response = await self.http.request(
            "POST", f"/api/v1/prediction/{flow_id}", json=body, max_bytes=answer_bytes()
        )
        data = _json_or_not_found(response, self.config.name)
        if not isinstance(data, dict) or ("text" not in data and "json" not in data):
            raise BackendUnexpectedError(
                f"Flowise backend {self.config.name!r} answered without text.",
                backend=self.config.name,
                details=reply_details(response),
            )
        text = data.get("text")
        if text is None:
            text = json.dumps(data.get("json"))
        metadata = {k: data[k] for k in MESSAGE_IDS if data.get(k)}
        return ExecutionResult(
            text=str(text),
            session_id=str(data.get("sessionId") or ""),
            metadata=metadata,
            usage=executed_data_usage(data.get("agentFlowExecutedData")),
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
        body = prediction_body(question, session_id, parameters, stream=True, history=history)
        async with self.http.stream(
            "POST", f"/api/v1/prediction/{flow_id}", json=body, max_bytes=answer_bytes()
        ) as response:
            if not response.headers.get("content-type", "").startswith("text/event-stream"):
                # Not streamable (e.g. a custom-function CHATFLOW): a plain JSON answer.
                await response.aread()
                data = _json_or_not_found(response, self.config.name)
                if not isinstance(data, dict):
                    raise unreadable("Flowise", self.config.name, "answer", response)
                text = str(data.get("text", ""))
                yield StreamEvent("chunk", text)
                yield StreamEvent(
                    "end",
                    text,
                    str(data.get("sessionId") or ""),
                    usage=executed_data_usage(data.get("agentFlowExecutedData")),
                )
                return
            parts: list[str] = []
            session = ""
            executed: Any = None
            streamed_usage: list[Usage | None] = []
            async for event, payload in _sse_events(response):
                if event == "token" and payload:
                    parts.append(str(payload))
                    yield StreamEvent("chunk", str(payload))
                elif event == "metadata" and isinstance(payload, dict):
                    session = str(payload.get("sessionId") or payload.get("chatId") or "")
                elif event == "agentFlowExecutedData":
                    executed = payload  # each one lists every node so far: the last one counts
                elif event == "usageMetadata":
                    streamed_usage.append(usage_metadata(payload))
                elif event == "error":
                    raise self.http.clean_error(map_stream_error(str(payload), self.config.name))
                elif event == "end":
                    break
            yield StreamEvent(
                "end", "".join(parts), session, usage=stream_usage(executed, streamed_usage)
            )

    # --- managing chatflows ------------------------------------------------------

    async def _list_flows(self) -> list[FlowRecord]:
        response = await self.http.request("GET", "/api/v1/chatflows")
        body = _json_or_not_found(response, self.config.name)
        if not isinstance(body, list):
            raise unreadable("Flowise", self.config.name, "flow list", response)
        return [self._record(item, response) for item in body]

    async def _get_flow(self, flow_id: str) -> FlowRecord:
        response = await self.http.request("GET", f"/api/v1/chatflows/{flow_id}")
        return self._record(_json_or_not_found(response, self.config.name), response)

    async def _create_flow(
        self, *, name: str, flow_data: Mapping[str, Any], flow_type: str, deployed: bool | None
    ) -> FlowRecord:
        fields = {
            "name": name,
            "flowData": flow_data,
            "type": flow_type,
            "deployed": bool(deployed),
        }
        response = await self.http.request("POST", "/api/v1/chatflows", json=encode_fields(fields))
        return self._record(_json_or_not_found(response, self.config.name), response)

    async def _update_flow(
        self,
        flow_id: str,
        *,
        name: str | None,
        flow_data: Mapping[str, Any] | None,
        description: str | None,
        deployed: bool | None,
    ) -> FlowRecord:
        # A flow's description is what Flowise calls its category (see flow_record).
        given = {"name": name, "flowData": flow_data, "category": description, "deployed": deployed}
        return await self.put_chatflow(flow_id, {k: v for k, v in given.items() if v is not None})

    async def put_chatflow(self, chatflow_id: str, fields: Mapping[str, Any]) -> FlowRecord:
        """Change any of a chatflow's fields, in Flowise's own names (``apiConfig``...)."""
        response = await self.http.request(
            "PUT", f"/api/v1/chatflows/{chatflow_id}", json=encode_fields(fields)
        )
        return self._record(_json_or_not_found(response, self.config.name), response)

    async def delete_flow(self, flow_id: str) -> None:
        # Not retried: a retry after a lost answer would report "not found".
        response = await self.http.request("DELETE", f"/api/v1/chatflows/{flow_id}", retry=False)
        _json_or_not_found(response, self.config.name)

    async def generate_flow(
        self, description: str, chat_model: Mapping[str, Any]
    ) -> dict[str, Any]:
        """Ask Flowise's generator for an AgentFlow V2; it needs an LLM (``chat_model``)."""
        response = await self.http.request(
            "POST",
            "/api/v1/agentflowv2-generator/generate",
            json={"question": description, "selectedChatModel": dict(chat_model)},
        )
        data = _json_or_not_found(response, self.config.name)
        if isinstance(data, dict) and "error" in data:
            raise self.http.clean_error(
                BackendValidationError(
                    f"Flowise backend {self.config.name!r} could not generate a flow: "
                    f"{data['error']}. Check the chat model's name and credentials.",
                    backend=self.config.name,
                    http_status=response.status_code,
                    details={"raw_response": data.get("rawResponse")},
                )
            )
        if not isinstance(data, dict) or "nodes" not in data:
            raise BackendUnexpectedError(
                f"Flowise backend {self.config.name!r} generated no nodes.",
                backend=self.config.name,
                details=reply_details(response),
            )
        return {"nodes": data.get("nodes") or [], "edges": data.get("edges") or []}

    def _record(self, body: Any, response: Response) -> FlowRecord:
        try:
            return flow_record(decode_record(body))
        except (KeyError, TypeError, ValueError) as err:
            raise unreadable("Flowise", self.config.name, "chatflow", response) from err


def _int(value: Any) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return 0


def map_stream_error(message: str, backend: str) -> BackendError:
    """An ``error`` event inside a 200 stream, typed like the same error outside one."""
    lowered = message.lower()
    text = f"Flowise backend {backend!r}: {message}"
    if lowered.endswith("unauthorized"):
        return BackendAuthenticationError(text, backend=backend)
    if "not found" in lowered:
        return BackendNotFoundError(text, backend=backend)
    if _is_bad_input(lowered):
        return BackendValidationError(text, backend=backend)
    return BackendUnexpectedError(text, backend=backend)


async def _sse_events(response: Response) -> AsyncIterator[tuple[str, Any]]:
    """Flowise's stream: ``message:`` then ``data:{"event": ..., "data": ...}`` lines."""
    async for line in response.aiter_lines():
        if not line.startswith("data:"):
            continue  # "message:" lines, ":heartbeat" comments, blank separators
        try:
            event = loads(line[len("data:") :])
        except ValueError:
            continue
        if isinstance(event, dict):
            yield str(event.get("event", "")), event.get("data")

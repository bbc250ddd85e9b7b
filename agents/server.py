"""The MCP server: Flywheel's tools for agents, over the services every door shares.

:func:`build_server` registers the tools of agents/tools.py, each behind
:func:`door`, which

- authenticates the caller and counts the call against its key's rate
  limit (agents/auth.py), then passes the key's tenant to the tool;
- turns every application error into the one error shape, and anything
  else into the InternalError shape (logged with its traceback on stderr,
  never shown to the client).

:class:`FlywheelMCP` sees to the errors the SDK itself raises (arguments
that fail the input schema, an unknown tool), so that every failed call's
text is exactly ``{"error": {"type", "message", "details"}}``: the SDK
would prefix it with "Error executing tool <name>: ".
"""

from __future__ import annotations

import inspect
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Annotated, Any

from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp.server.mcpserver.tools import Tool
from mcp_types import CallToolResult, InputRequiredResult, ToolAnnotations
from pydantic import BaseModel, SkipValidation, create_model
from pydantic import ValidationError as SchemaError

from agents import tools
from agents.auth import Caller, admitted
from flywheel.contract import refusal
from flywheel.errors import ApplicationError, error_body, internal_error_body
from flywheel.metrics import REQUESTS
from flywheel.schemas import mcp_schema
from routing.answering.service import serving_stop
from routing.recording.writer import writer_start

logger = logging.getLogger(__name__)

INSTRUCTIONS = (
    "Flywheel routes questions to the best Flowise or Langflow flow. Ask with "
    "universal_query (pass session_id back to continue a conversation); route_query shows "
    "the choice without running anything. The chatflow tools manage flows on your own "
    'backends. A failed call\'s text is JSON: {"error": {"type", "message", "details"}}.'
)

READ_ONLY = ToolAnnotations(read_only_hint=True, open_world_hint=False)
RUNS = ToolAnnotations(read_only_hint=False, destructive_hint=False, open_world_hint=True)
WRITES = ToolAnnotations(read_only_hint=False, destructive_hint=False, open_world_hint=True)
# Flywheel's own settings, on Flywheel's rows: no backend is called, and setting the
# same values again changes nothing.
SETS = ToolAnnotations(
    read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=False
)
DELETES = ToolAnnotations(read_only_hint=False, destructive_hint=True, open_world_hint=True)

# name -> (function, annotations), in the order clients list them.
TOOLS: dict[str, tuple[Callable[..., Awaitable[CallToolResult]], ToolAnnotations]] = {
    "universal_query": (tools.universal_query, RUNS),
    "route_query": (tools.route_query, READ_ONLY),
    "flowise_query": (tools.flowise_query, RUNS),
    "list_backends": (tools.list_backends, READ_ONLY),
    "check_backend_health": (tools.check_backend_health, RUNS),
    "list_flows": (tools.list_flows, READ_ONLY),
    "set_flow_routing": (tools.set_flow_routing, SETS),
    "list_chatflows": (tools.list_chatflows, READ_ONLY),
    "get_chatflow": (tools.get_chatflow, READ_ONLY),
    "create_chatflow": (tools.create_chatflow, WRITES),
    "update_chatflow": (tools.update_chatflow, WRITES),
    "delete_chatflow": (tools.delete_chatflow, DELETES),
    "run_prediction": (tools.run_prediction, RUNS),
    "deploy_chatflow": (tools.deploy_chatflow, WRITES),
    "generate_agentflow_v2": (tools.generate_agentflow_v2, RUNS),
    "get_session_history": (tools.get_session_history, READ_ONLY),
    "list_sessions": (tools.list_sessions, READ_ONLY),
}


def _shape(body: dict[str, Any]) -> str:
    return json.dumps(body, ensure_ascii=False)


def door(caller: Caller, fn: Callable[..., Awaitable[CallToolResult]]) -> Callable[..., Any]:
    """``fn(tenant, **arguments)`` as a tool taking only its arguments.

    The published signature is ``fn``'s without ``tenant``, so the SDK builds
    the schema from the tool's own parameters.
    """
    signature = inspect.signature(fn, eval_str=True)
    published = [
        p
        for name, p in signature.parameters.items()
        if name != "tenant" and p.kind != p.VAR_KEYWORD
    ]

    async def call(**arguments: Any) -> CallToolResult:
        given = {name: value for name, value in arguments.items() if value is not _ABSENT}
        try:
            api_key = await admitted(caller)
            return await fn(api_key.tenant, **given)
        except ApplicationError as err:
            raise ToolError(_shape(err.as_dict())) from err
        except Exception as err:
            logger.exception("MCP tool %s failed inside Flywheel", fn.__name__)
            raise ToolError(_shape(internal_error_body())) from err

    call.__name__ = call.__qualname__ = fn.__name__
    call.__doc__ = fn.__doc__
    call.__module__ = fn.__module__
    call.__signature__ = signature.replace(parameters=published)  # type: ignore[attr-defined]
    call.__annotations__ = {p.name: p.annotation for p in published} | {
        "return": signature.return_annotation
    }
    return call


_ABSENT: Any = object()  # an argument the caller left out


def _with_contract(tool: Tool, fn: Callable[..., Any]) -> Tool:
    """``tool`` taking the contract fields ``fn`` is marked with (agents.tools.takes):
    published as the contract declares them; checked by the SDK against it, or handed
    over as sent (the SDK's reading of JSON inside strings aside) for the service to
    validate."""
    contract, fields, validated = getattr(fn, "__contract__", (None, (), False))
    if contract is None:
        return tool
    declared = mcp_schema(contract)
    taken = {name: contract.model_fields[name] for name in fields}
    tool.fn_metadata.arg_model = create_model(  # type: ignore[call-overload]
        tool.fn_metadata.arg_model.__name__,
        __base__=tool.fn_metadata.arg_model,
        **{
            name: (info.annotation, info)
            if validated
            else (Annotated[info.annotation, SkipValidation], _ABSENT)
            for name, info in taken.items()
        },
    )
    published = dict(tool.parameters)
    published["properties"] = {
        **published.get("properties", {}),
        **{name: declared["properties"][name] for name in fields},
    }
    required = [*published.get("required", [])]
    required += [name for name in declared.get("required", []) if name in fields]
    if required:
        published["required"] = required
    tool.parameters = published
    return tool


def _schema_refusal(err: SchemaError, arguments: type[BaseModel] | None) -> dict[str, Any]:
    """Arguments the input schema refuses, as the services refuse a bad field: in the
    words the arguments' types declare (flywheel.contract.refusal), seed 003's
    ``field`` and ``constraint`` included where they name them."""
    if arguments is None:  # no tool of that name: nothing declares the words
        fields = {
            ".".join(str(part) for part in problem["loc"]) or "arguments": problem["msg"]
            for problem in err.errors(include_url=False, include_input=False)
        }
        details: dict[str, Any] = {"fields": fields}
    else:
        details = refusal(arguments, err).details
    return error_body(
        "ValidationError", "The arguments do not match the tool's input schema.", details
    )


def error_shape(
    name: str, exc: ToolError, arguments: type[BaseModel] | None = None
) -> dict[str, Any]:
    """The error shape of a failed call, whoever raised it (``arguments``: the tool's
    arguments model, when there is such a tool)."""
    cause = exc.__cause__
    if isinstance(exc, UnexpectedToolError):  # the SDK's own conversion failed: a bug here
        logger.error("MCP tool %s failed inside the SDK", name, exc_info=exc)
        return internal_error_body()
    if isinstance(cause, SchemaError):
        return _schema_refusal(cause, arguments)
    if isinstance(cause, ToolError):  # raised by door(): already the shape
        try:
            shaped = json.loads(str(cause))
        except ValueError:
            shaped = None
        if isinstance(shaped, dict) and "error" in shaped:
            return shaped
    if str(exc).startswith("Unknown tool"):
        return error_body("NotFoundError", f"No tool {name!r}.", {"tool": name[:100]})
    return error_body("ValidationError", str(exc)[:500])


class FlywheelMCP(MCPServer[Any]):
    """MCPServer whose failed calls all answer in Flywheel's error shape.

    Every call is counted in ``flywheel_requests_total`` with door ``mcp`` and, for
    status, ``ok`` or the error's type (stdio has no HTTP status to give).
    """

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context[Any, Any] | None = None
    ) -> CallToolResult | InputRequiredResult:
        try:
            result = await super().call_tool(name, arguments, context)
        except ToolError as exc:
            tool = self._tool_manager.get_tool(name)
            shaped = error_shape(name, exc, tool.fn_metadata.arg_model if tool else None)
            REQUESTS.labels("mcp", shaped["error"]["type"]).inc()
            raise ToolError(_shape(shaped)) from exc
        REQUESTS.labels("mcp", "ok").inc()
        return result


@asynccontextmanager
async def _lifespan(server: MCPServer[Any]) -> AsyncIterator[dict[str, Any]]:
    """At start-up, start the decision writer (it replays what a killed process left);
    at shutdown, the same clean stop as the web's (flywheel/asgi.py)."""
    writer_start()
    try:
        yield {}
    finally:
        await serving_stop()


def build_server(caller: Caller) -> FlywheelMCP:
    """The MCP server with every tool, acting for ``caller``."""
    registered = [
        _with_contract(Tool.from_function(door(caller, fn), name=name, annotations=annotations), fn)
        for name, (fn, annotations) in TOOLS.items()
    ]
    return FlywheelMCP(
        name="flywheel", instructions=INSTRUCTIONS, tools=registered, lifespan=_lifespan
    )

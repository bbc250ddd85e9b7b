"""REST doors for the flow lifecycle (seed 003), on every backend the key may use.

Async views (flywheel/asyncapi.py): a create or a deploy waits on a backend,
and must not hold a worker thread while it does. Each calls one service of
chatflows/lifecycle.py; their bodies are declared in chatflows/contract.py, which
chatflows/openapi.py documents. ``?backend=``
(an id or a name) picks the backend when a flow id is on several, and where
a new flow goes when the key has several backends.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.http import HttpRequest, JsonResponse
from django.http.response import HttpResponseBase

from chatflows.contract import (
    AgentflowRequest,
    ChatflowCreate,
    ChatflowDeploy,
    ChatflowReplace,
    ChatflowUpdate,
)
from chatflows.lifecycle import (
    chatflow_create,
    chatflow_delete,
    chatflow_deploy,
    chatflow_generate,
    chatflow_get,
    chatflow_update,
    chatflows_list,
)
from flywheel.asyncapi import async_api, json_body
from flywheel.asyncdb import db
from flywheel.contract import field_names, required_names
from flywheel.errors import ValidationError
from flywheel.models import ApiKey


def body_of(request: HttpRequest, contract: Any) -> dict[str, Any]:
    """The JSON object body, refusing fields ``contract`` does not take (the lifecycle
    checks the values, in seed 003's words)."""
    allowed = set(field_names(contract))
    data = json_body(request)
    if not isinstance(data, Mapping):
        raise ValidationError("The request body must be a JSON object.")
    unknown = sorted(str(name)[:50] for name in set(data) - allowed)
    if unknown:
        raise ValidationError(
            f"Unknown fields: {', '.join(unknown)}.",
            details={"fields": dict.fromkeys(unknown, "Unknown field.")},
        )
    return dict(data)


def backend_param(request: HttpRequest) -> str | None:
    """``?backend=``, or None when it is absent or blank once trimmed: an empty value
    (allowEmptyValue) names no backend, so it filters nothing."""
    value = request.GET.get("backend")
    return value if value is not None and value.strip() else None


@async_api("GET", "POST")
async def chatflows(request: HttpRequest, api_key: ApiKey) -> HttpResponseBase:
    """GET: the flows on the key's backends (``?backend=``, ``?type=``). POST: create one."""
    tenant = api_key.tenant
    if request.method == "GET":
        flows = await db(chatflows_list)(
            tenant=tenant, backend=backend_param(request), flow_type=request.GET.get("type") or None
        )
        return JsonResponse(flows, safe=False)
    body = body_of(request, ChatflowCreate)
    if missing := [name for name in required_names(ChatflowCreate) if name not in body]:
        raise ValidationError(
            f"Required: {', '.join(missing)}.",
            details={"fields": dict.fromkeys(missing, "Required.")},
        )
    created = await chatflow_create(tenant=tenant, backend=backend_param(request), **body)
    return JsonResponse(created, status=201)


@async_api("GET", "PUT", "PATCH", "DELETE")
async def chatflow(request: HttpRequest, api_key: ApiKey, chatflow_id: str) -> HttpResponseBase:
    """One flow: GET (with flowData), PUT (name and flow_data, deployed optional),
    PATCH (any of them), DELETE (``{message, deleted_id}``)."""
    tenant, backend = api_key.tenant, backend_param(request)
    if request.method == "GET":
        found = await chatflow_get(tenant=tenant, chatflow_id=chatflow_id, backend=backend)
        return JsonResponse(found)
    if request.method == "DELETE":
        gone = await chatflow_delete(tenant=tenant, chatflow_id=chatflow_id, backend=backend)
        return JsonResponse(gone)
    body = body_of(request, ChatflowUpdate)
    missing = [name for name in required_names(ChatflowReplace) if name not in body]
    if request.method == "PUT" and missing:
        raise ValidationError(
            f"PUT replaces the flow: send {' and '.join(missing)} (or use PATCH).",
            details={"fields": dict.fromkeys(missing, "Required.")},
        )
    updated = await chatflow_update(tenant=tenant, chatflow_id=chatflow_id, backend=backend, **body)
    return JsonResponse(updated)


@async_api("POST")
async def chatflow_deploy_view(
    request: HttpRequest, api_key: ApiKey, chatflow_id: str
) -> HttpResponseBase:
    """Deploy (``{"deployed": true}``, the default) or undeploy a Flowise chatflow."""
    body = body_of(request, ChatflowDeploy) if request.body else {}
    deployed = await chatflow_deploy(
        tenant=api_key.tenant,
        chatflow_id=chatflow_id,
        deployed=body.get("deployed", True),
        backend=backend_param(request),
    )
    return JsonResponse(deployed)


@async_api("POST")
async def chatflow_generate_view(request: HttpRequest, api_key: ApiKey) -> HttpResponseBase:
    """An AgentFlow V2 generated from ``{"description"}``: ``{flowData, name, description}``."""
    body = body_of(request, AgentflowRequest)
    generated = await chatflow_generate(
        tenant=api_key.tenant, description=body.get("description"), backend=backend_param(request)
    )
    return JsonResponse(generated)

"""The flow lifecycle (seed 003): list, get, create, update, delete, deploy, generate.

Every door (REST, MCP, admin, commands) calls these. They work on every
kind through the adapter interface (backends/adapters/base.py), as far as
each kind allows: what a kind cannot do (Langflow has no flow types, no
deployment step and no generator) is a ValidationError naming the kind,
never a silent no-op.

- Input is checked first, before any call to a backend, with the types its
  contract declares (chatflows/contract.py),
  and so is an update that changes nothing.
- A write goes to the backend first, then the Flow row follows in the same
  call, so Flywheel's view never drifts from the backend; if the backend
  refuses, the rows stay as they were.
- Tenancy: ``tenant`` is the caller's (None: staff, from the admin or a
  command). A tenant reads flows on shared backends and its own, and writes
  only on its own (chatflows/access.py).

Run (predict) lives in routing (``routing.answering.service.run_flow``): a run is a
routed query with its flow given, so it leaves a decision like any other.
"""

from __future__ import annotations

import json
import re
from typing import Any

from django.conf import settings

from backends.adapters import adapter_class, get_adapter, kinds
from backends.adapters.base import FlowBackend, FlowRecord
from backends.errors import BackendNotFoundError
from backends.models import Backend
from backends.services import backend_config
from chatflows import snapshot
from chatflows.access import (
    find_backend,
    generator_backend,
    resolve_backend_for_create,
    resolve_flow,
    visible,
)
from chatflows.contract import (
    MAX_NAME,
    AgentflowDescription,
    ChatflowId,
    ChatflowName,
    ChatflowType,
    Deployed,
    FlowData,
    OnBackend,
)
from chatflows.models import Flow
from chatflows.rows import flow_mark_removed, flow_upsert
from flywheel.asyncdb import db
from flywheel.contract import checked
from flywheel.errors import ValidationError
from flywheel.models import Tenant

# The lifecycle's public face: its operations, and the checks and the resolver that
# the doors (agents, routing) read from here.
__all__ = [
    "chatflow_create",
    "chatflow_delete",
    "chatflow_deploy",
    "chatflow_generate",
    "chatflow_get",
    "chatflow_update",
    "chatflows_list",
    "check_backend",
    "check_flow_id",
    "generator_model",
    "resolve_flow",
    "suggested_name",
]


def check_flow_id(value: Any) -> str:
    """A flow id as its backend makes it: it goes into the backend's URL path."""
    return str(checked(ChatflowId, value, "chatflow_id"))


def check_backend(value: Any) -> str | None:
    """The backend named (an id or a name, trimmed), or None when none is."""
    named: str | None = checked(OnBackend, value, "backend")
    return named


# --- the backend's records, in one shape ----------------------------------------------


def _adapter(backend: Backend) -> FlowBackend:
    return get_adapter(backend_config(backend))


def _record(backend: Backend, record: FlowRecord, *, with_data: bool) -> dict[str, Any]:
    """A flow as seed 003 shows it, whatever the kind (the adapter made the record)."""
    shown: dict[str, Any] = {
        "id": record.id,
        "name": record.name,
        "type": record.type,
        "deployed": record.deployed,
        "description": record.description,
        "createdDate": record.created,
        "updatedDate": record.updated,
        "backend": backend.name,
        "backend_id": backend.pk,
        "kind": backend.kind,
    }
    if with_data:
        data = record.flow_data
        shown["flowData"] = data if isinstance(data, str) or data is None else json.dumps(data)
    return shown


async def _stored(backend: Backend, record: FlowRecord, *, with_data: bool) -> dict[str, Any]:
    """Keep the Flow row in step with ``record``; the record as shown, with ``flow_id``."""
    flow = await db(flow_upsert)(backend=backend, item=record.discovered)
    await db(snapshot.publish_flows)()
    return {**_record(backend, record, with_data=with_data), "flow_id": flow.pk}


def _row_fields(flow: Flow) -> dict[str, Any]:
    return {
        "id": flow.external_id,
        "name": flow.name,
        "type": adapter_class(flow.backend.kind).shown_type(flow.flow_type),
        "deployed": flow.deployed,
        "description": flow.description,
        "backend": flow.backend.name,
        "backend_id": flow.backend_id,
        "kind": flow.backend.kind,
        "flow_id": flow.pk,
        "createdDate": flow.backend_created or None,
        "intent_keywords": list(flow.intent_keywords),
        "last_seen_at": flow.last_seen_at.isoformat(),
    }


# --- the operations -------------------------------------------------------------------


def chatflows_list(
    *, tenant: Tenant | None, backend: str | None = None, flow_type: str | None = None
) -> list[dict[str, Any]]:
    """The flows Flywheel knows on the backends the caller may see (kept by discovery and
    by every write made through Flywheel), by backend name then flow name; ``backend``
    and ``flow_type`` narrow it. Flows of a kind without types (Langflow) show as "FLOW"."""
    backend = check_backend(backend)
    rows = Flow.objects.active().filter(
        backend__in=Backend.objects.filter(visible(tenant)), backend__kind__in=kinds()
    )
    if backend is not None:
        rows = rows.filter(backend=find_backend(tenant, backend))
    if flow_type is not None:
        rows = rows.filter(flow_type=checked(ChatflowType, flow_type, "type"))
    return [
        _row_fields(f) for f in rows.select_related("backend").order_by("backend__name", "name")
    ]


async def chatflow_get(
    *, tenant: Tenant | None, chatflow_id: Any, backend: Any = None
) -> dict[str, Any]:
    """One flow as its backend has it now, ``flowData`` included (a JSON string)."""
    target = await db(resolve_flow)(
        tenant=tenant, flow_id=check_flow_id(chatflow_id), backend=check_backend(backend)
    )
    record = await _adapter(target.backend).get_flow(target.external_id)
    return await _stored(target.backend, record, with_data=True)


async def chatflow_create(
    *,
    tenant: Tenant | None,
    name: Any,
    flow_data: Any,
    type: Any = "CHATFLOW",  # seed 003's field name
    deployed: Any = None,
    backend: Any = None,
) -> dict[str, Any]:
    """Create a flow on the caller's backend; returns it with Flywheel's ``flow_id``.

    A kind without flow types or deployment (Langflow) refuses a ``type``
    other than CHATFLOW and ``deployed: false``.
    """
    name = checked(ChatflowName, name, "name")
    data = json.loads(checked(FlowData, flow_data, "flow_data"))
    flow_type = checked(ChatflowType, type if type is not None else "CHATFLOW", "type")
    if deployed is not None:
        deployed = checked(Deployed, deployed, "deployed")
    chosen = await db(resolve_backend_for_create)(tenant=tenant, backend=check_backend(backend))
    record = await _adapter(chosen).create_flow(
        name=name, flow_data=data, flow_type=flow_type, deployed=deployed
    )
    return await _stored(chosen, record, with_data=False)


async def chatflow_update(
    *,
    tenant: Tenant | None,
    chatflow_id: Any,
    name: Any = None,
    flow_data: Any = None,
    deployed: Any = None,
    backend: Any = None,
) -> dict[str, Any]:
    """Change a flow's name, flowData or deployment (at least one)."""
    name = None if name is None else checked(ChatflowName, name, "name")
    data = None if flow_data is None else json.loads(checked(FlowData, flow_data, "flow_data"))
    deployed = None if deployed is None else checked(Deployed, deployed, "deployed")
    if name is None and data is None and deployed is None:
        raise ValidationError(
            "Nothing to update: give name, flow_data or deployed.",
            details={"field": None, "constraint": "anyOf", "fields": {"name": "One is required."}},
        )
    target = await db(resolve_flow)(
        tenant=tenant,
        flow_id=check_flow_id(chatflow_id),
        backend=check_backend(backend),
        write=True,
    )
    record = await _adapter(target.backend).update_flow(
        target.external_id, name=name, flow_data=data, deployed=deployed
    )
    return await _stored(target.backend, record, with_data=False)


async def chatflow_deploy(
    *, tenant: Tenant | None, chatflow_id: Any, deployed: Any, backend: Any = None
) -> dict[str, Any]:
    """Deploy or undeploy a flow (a kind without deployment: a ValidationError naming it)."""
    wanted = checked(Deployed, deployed, "deployed")
    target = await db(resolve_flow)(
        tenant=tenant,
        flow_id=check_flow_id(chatflow_id),
        backend=check_backend(backend),
        write=True,
    )
    record = await _adapter(target.backend).deploy_flow(target.external_id, wanted)
    return await _stored(target.backend, record, with_data=False)


async def chatflow_delete(
    *, tenant: Tenant | None, chatflow_id: Any, backend: Any = None
) -> dict[str, Any]:
    """Delete a flow from its backend; its row is marked removed (decisions keep it).

    A flow the backend no longer has is a NotFoundError, and its row is marked
    removed too, so Flywheel stops offering it.
    """
    target = await db(resolve_flow)(
        tenant=tenant,
        flow_id=check_flow_id(chatflow_id),
        backend=check_backend(backend),
        write=True,
    )
    try:
        await _adapter(target.backend).delete_flow(target.external_id)
    except BackendNotFoundError:
        await db(flow_mark_removed)(backend=target.backend, external_id=target.external_id)
        await db(snapshot.publish_flows)()
        raise
    await db(flow_mark_removed)(backend=target.backend, external_id=target.external_id)
    await db(snapshot.publish_flows)()
    return {"message": "Chatflow deleted successfully", "deleted_id": target.external_id}


# --- generate ---------------------------------------------------------------------------


def generator_model() -> dict[str, Any] | None:
    """The chat model Flowise's AgentFlow V2 generator is asked to use (FLOWISE_GENERATOR_MODEL),
    or None when the operator configured none."""
    return settings.FLOWISE_GENERATOR_MODEL or None


def suggested_name(description: str) -> str:
    """A short title for a generated flow, from the first words of its description."""
    words = re.findall(r"[A-Za-z0-9][A-Za-z0-9'-]*", description)
    skip = {"a", "an", "the", "create", "build", "make", "me", "please"}
    kept = [w for w in words if w.lower() not in skip][:5] or ["Generated"]
    return " ".join(w if w.isupper() else w.capitalize() for w in kept)[:MAX_NAME]


async def chatflow_generate(
    *, tenant: Tenant | None, description: Any, backend: Any = None
) -> dict[str, Any]:
    """Ask a backend's generator (Flowise's AgentFlow V2) for a flow that does what
    ``description`` says: ``{flowData, name, description}``, ready for chatflow_create.
    Nothing is stored."""
    text = checked(AgentflowDescription, description, "description")
    model = generator_model()
    if model is None:
        raise ValidationError(
            "Flow generation needs a chat model: the operator sets FLOWISE_GENERATOR_MODEL.",
            details={"operation": "generate", "setting": "FLOWISE_GENERATOR_MODEL"},
        )
    chosen = await db(generator_backend)(tenant, check_backend(backend))
    flow_data = await _adapter(chosen).generate_flow(text, model)
    return {
        "flowData": json.dumps(flow_data),
        "name": suggested_name(text),
        "description": text,
        "backend": chosen.name,
    }

"""The flow lifecycle (seed 003): list, get, create, update, delete, deploy, generate.

Every door (REST, MCP, admin, commands) calls these. They work on every
kind through the adapter interface (backends/adapters/base.py), as far as
each kind allows: what a kind cannot do (Langflow has no flow types, no
deployment step and no generator) is a ValidationError naming the kind,
never a silent no-op.

- Input is checked here, before any call to a backend: a name of 1-255
  characters; ``flow_data`` a JSON object under 1 MB holding ``nodes`` and
  ``edges`` lists; ``type`` in CHATFLOW_TYPES; a generate description of at
  least 10 characters; an update that changes something.
- A write goes to the backend first, then the Flow row follows in the same
  call, so Flywheel's view never drifts from the backend; if the backend
  refuses, the rows stay as they were.
- Tenancy: ``tenant`` is the caller's (None: staff, from the admin or a
  command). A tenant reads flows on shared backends and its own, and writes
  only on its own.

Run (predict) lives in routing (``routing.service.run_flow``): a run is a
routed query with its flow given, so it leaves a decision like any other.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db.models import Q

from backends.adapters import adapter_class, generating_kinds, get_adapter, kinds
from backends.adapters.base import FlowBackend, FlowRecord
from backends.errors import BackendNotFoundError
from backends.models import Backend
from backends.selectors import as_id
from backends.services import backend_config
from chatflows import snapshot
from chatflows.models import Flow
from chatflows.rows import flow_mark_removed, flow_upsert
from flywheel.asyncdb import db
from flywheel.errors import NotFoundError, PermissionDeniedError, ValidationError
from flywheel.jsonin import string_problem
from flywheel.models import Tenant

CHATFLOW_TYPES = ("CHATFLOW", "AGENTFLOW", "MULTIAGENT", "ASSISTANT")
MAX_NAME = 255
MAX_FLOW_DATA_BYTES = 1_000_000
MIN_DESCRIPTION = 10
MAX_DESCRIPTION = 10_000
MAX_FLOW_ID = 200  # as Flow.external_id
FLOW_ID = re.compile(rf"[A-Za-z0-9][A-Za-z0-9_.:-]{{0,{MAX_FLOW_ID - 1}}}")
MAX_BACKEND = 100


# --- input ------------------------------------------------------------------------


def _invalid(field: str, message: str, constraint: str, value: Any = None) -> ValidationError:
    """Seed 003's shape: ``details`` names the field, the constraint and (short) value."""
    shown = value if isinstance(value, bool | int | float) or value is None else str(value)[:80]
    return ValidationError(
        message,
        details={
            "field": field,
            "value": shown,
            "constraint": constraint,
            "fields": {field: message},
        },
    )


def check_name(value: Any) -> str:
    if not isinstance(value, str) or not value.strip() or len(value) > MAX_NAME:
        raise _invalid(
            "name", f"Chatflow name must be between 1 and {MAX_NAME} characters.", "length", value
        )
    if problem := string_problem(value):
        raise _invalid("name", f"Chatflow name must be text: it {problem}.", "text")
    return value.strip()


def check_flow_data(value: Any) -> dict[str, Any]:
    """``flow_data`` as seed 003 sends it: a JSON string under 1 MB of an object holding
    ``nodes`` and ``edges`` lists. Returns the decoded object."""
    if not isinstance(value, str) or not value:
        raise _invalid("flow_data", "flow_data must be a JSON string.", "type", "(not a string)")
    if len(value.encode("utf-8", "surrogatepass")) >= MAX_FLOW_DATA_BYTES:
        raise _invalid("flow_data", "flow_data must be under 1 MB.", "maxSize", "(too large)")
    try:
        data = json.loads(value)
    except json.JSONDecodeError as err:
        raise _invalid(
            "flow_data", f"flow_data is not valid JSON: {err.msg}.", "json", "(not JSON)"
        ) from err
    except ValueError as err:  # e.g. a number too long to convert
        raise _invalid("flow_data", "flow_data is not valid JSON.", "json", "(not JSON)") from err
    if not isinstance(data, dict):
        raise _invalid("flow_data", "flow_data must be a JSON object.", "object", "(not an object)")
    missing = [k for k in ("nodes", "edges") if not isinstance(data.get(k), list)]
    if missing:
        raise _invalid(
            "flow_data",
            f"flow_data must hold {' and '.join(missing)} as lists.",
            "nodesAndEdges",
            "(missing " + ", ".join(missing) + ")",
        )
    return data


def check_type(value: Any) -> str:
    if value not in CHATFLOW_TYPES:
        raise _invalid("type", f"type must be one of {', '.join(CHATFLOW_TYPES)}.", "enum", value)
    return str(value)


def check_deployed(value: Any, field: str = "deployed") -> bool:
    if not isinstance(value, bool):
        raise _invalid(field, f"{field} must be true or false.", "type", value)
    return value


def check_flow_id(value: Any, field: str = "chatflow_id") -> str:
    """A flow id as the backends and Flywheel make them (UUIDs, digits): it goes into a
    backend's URL path, so nothing that could leave that path (``/``, ``..``, ``?``)."""
    text = str(value) if isinstance(value, str | int) and not isinstance(value, bool) else ""
    if not FLOW_ID.fullmatch(text):
        raise _invalid(
            field,
            f"{field} must be a flow's id: 1-{MAX_FLOW_ID} letters, digits, '-', '_', '.' "
            "or ':', starting with a letter or digit.",
            "format",
            value,
        )
    return text


def check_backend(value: Any) -> str | None:
    """The backend named (an id or a name, trimmed), or None when none is: absent, or a
    string blank once trimmed (``?backend=`` sent empty, as allowEmptyValue permits)."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if not isinstance(value, str | int) or isinstance(value, bool):
        raise _invalid("backend", "backend must be a backend's id or name.", "type", value)
    text = str(value).strip()
    if not 0 < len(text) <= MAX_BACKEND or string_problem(text):
        raise _invalid(
            "backend",
            f"backend must be a backend's id or name (1-{MAX_BACKEND} characters).",
            "format",
            value,
        )
    return text


def check_description(value: Any) -> str:
    if not isinstance(value, str) or len(value.strip()) < MIN_DESCRIPTION:
        raise _invalid(
            "description",
            f"Describe the flow in at least {MIN_DESCRIPTION} characters.",
            "minLength",
            value,
        )
    if len(value) > MAX_DESCRIPTION or string_problem(value):
        raise _invalid(
            "description",
            f"The description must be text of at most {MAX_DESCRIPTION} characters.",
            "maxLength",
        )
    return value.strip()


# --- who may touch which backend and flow -------------------------------------------


@dataclass(frozen=True)
class Target:
    """A flow (or, for create, only a backend) the caller may act on."""

    backend: Backend
    external_id: str = ""
    flow: Flow | None = None


def _visible(tenant: Tenant | None) -> Q:
    return Q() if tenant is None else Q(tenant__isnull=True) | Q(tenant=tenant)


def _find_backend(tenant: Tenant | None, backend: str) -> Backend:
    """A backend the caller may see, by name (its own before a shared one of that name),
    else by id: as routing.planning reads a query's backend."""
    candidates = Backend.objects.filter(_visible(tenant), kind__in=kinds())
    pk = as_id(backend)
    found = candidates.filter(Q(name__iexact=backend) | Q(pk=pk) if pk else Q(name__iexact=backend))
    wanted = backend.lower()
    ordered = sorted(found, key=lambda b: (b.name.lower() != wanted, b.tenant_id is None, b.pk))
    if not ordered:
        raise NotFoundError(f"No backend {backend!r}.", details={"backend": backend})
    return ordered[0]


def _may_write(tenant: Tenant | None, backend: Backend) -> None:
    if tenant is not None and backend.tenant_id != tenant.pk:
        raise PermissionDeniedError(
            f"Flows on the shared backend {backend.name!r} are managed by an administrator; "
            "a key manages flows only on its own backends.",
            details={"backend": backend.name},
        )


def resolve_flow(
    *, tenant: Tenant | None, flow_id: str, backend: str | None = None, write: bool = False
) -> Target:
    """The flow ``flow_id`` names: a backend's own id for it, or Flywheel's Flow id.

    With ``backend`` the id is looked up on that backend, even if discovery
    has not seen the flow yet; without it, among the flows Flywheel knows on
    the backends the caller may see. Raises NotFoundError (unknown, or not
    visible: no existence leak), ValidationError (the id is on several
    backends: name one), PermissionDeniedError (``write`` on a shared
    backend by a tenant).
    """
    known = Flow.objects.active().filter(backend__in=Backend.objects.filter(_visible(tenant)))
    known = known.filter(backend__kind__in=kinds()).select_related("backend")
    if backend is not None:
        chosen = _find_backend(tenant, backend)
        row = known.filter(backend=chosen, external_id=flow_id).first()
        pk = as_id(flow_id)
        if row is None and pk is not None:
            row = known.filter(backend=chosen, pk=pk).first()
        target = Target(chosen, row.external_id if row else flow_id, row)
    else:
        rows = list(known.filter(external_id=flow_id))
        pk = as_id(flow_id)
        if not rows and pk is not None:
            rows = list(known.filter(pk=pk))
        if not rows:
            raise NotFoundError(
                f"No flow {flow_id!r} on the backends you can use. If it was made on the "
                "backend just now, name the backend.",
                details={"chatflow_id": flow_id},
            )
        if len(rows) > 1:
            raise ValidationError(
                f"Flow id {flow_id!r} is on several backends: name one.",
                details={"chatflow_id": flow_id, "backends": sorted(r.backend.name for r in rows)},
            )
        target = Target(rows[0].backend, rows[0].external_id, rows[0])
    if write:
        _may_write(tenant, target.backend)
    return target


def resolve_backend_for_create(*, tenant: Tenant | None, backend: str | None) -> Backend:
    """Where a new flow goes: the named backend, or the caller's only writable one."""
    if backend is not None:
        chosen = _find_backend(tenant, backend)
        _may_write(tenant, chosen)
        return chosen
    owned = Q() if tenant is None else Q(tenant=tenant)
    writable = list(Backend.objects.filter(owned, kind__in=kinds(), enabled=True).order_by("name"))
    if len(writable) != 1:
        raise _invalid(
            "backend",
            "Name the backend to create the flow on: "
            + (
                "one of " + ", ".join(repr(b.name) for b in writable) + "."
                if writable
                else "you have no backend of your own to write to (register one first)."
            ),
            "required",
        )
    return writable[0]


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
        backend__in=Backend.objects.filter(_visible(tenant)), backend__kind__in=kinds()
    )
    if backend is not None:
        rows = rows.filter(backend=_find_backend(tenant, backend))
    if flow_type is not None:
        rows = rows.filter(flow_type=check_type(flow_type))
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
    name = check_name(name)
    data = check_flow_data(flow_data)
    flow_type = check_type(type if type is not None else "CHATFLOW")
    if deployed is not None:
        deployed = check_deployed(deployed)
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
    name = None if name is None else check_name(name)
    data = None if flow_data is None else check_flow_data(flow_data)
    deployed = None if deployed is None else check_deployed(deployed)
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
    wanted = check_deployed(deployed)
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


def _generators(joiner: str) -> str:
    """The kinds that have a generator, by name: "Flowise"."""
    return joiner.join(adapter_class(kind).label for kind in generating_kinds())


def _generator_backend(tenant: Tenant | None, backend: str | None) -> Backend:
    """A backend with a generator to generate on: the named one, or the first shared one.

    The configured chat model (which may carry credentials) goes only to
    shared backends, the operator's own servers, never to a tenant's.
    """
    if backend is not None:
        chosen = _find_backend(tenant, backend)
        if chosen.kind not in generating_kinds():
            makers = _generators(" and ")
            verb = "has" if len(generating_kinds()) == 1 else "have"
            raise adapter_class(chosen.kind).unsupported(
                chosen.name, f"generating flows (only {makers} {verb} a generator)"
            )
    else:
        first = (
            Backend.objects.filter(kind__in=generating_kinds(), enabled=True, tenant__isnull=True)
            .order_by("name")
            .first()
        )
        if first is None:
            raise ValidationError(
                f"No shared {_generators(' or ')} backend to generate on.",
                details={"operation": "generate"},
            )
        chosen = first
    if chosen.tenant_id is not None:
        raise ValidationError(
            f"Flows are generated on shared {_generators(' or ')} backends only: the "
            "generator's chat model is the operator's and is never sent to a tenant's server.",
            details={"backend": chosen.name, "operation": "generate"},
        )
    return chosen


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
    text = check_description(description)
    model = generator_model()
    if model is None:
        raise ValidationError(
            "Flow generation needs a chat model: the operator sets FLOWISE_GENERATOR_MODEL.",
            details={"operation": "generate", "setting": "FLOWISE_GENERATOR_MODEL"},
        )
    chosen = await db(_generator_backend)(tenant, check_backend(backend))
    flow_data = await _adapter(chosen).generate_flow(text, model)
    return {
        "flowData": json.dumps(flow_data),
        "name": suggested_name(text),
        "description": text,
        "backend": chosen.name,
    }

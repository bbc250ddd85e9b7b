"""The models of the OpenAI-compatible door: one that routes, and one per flow.

A model id names what answers: ``flywheel`` (or ``auto``) routes each question by
its intent, health and measured performance; ``<backend>/<flow>`` runs that flow
(a flow whose backend holds another of the same name gets ``#<id>`` after it). The
flows are the routable ones a key may run, read from the routing state every
process keeps in memory, so naming a model costs no database read.
"""

from __future__ import annotations

from dataclasses import dataclass

from chatflows.contract import FLOW_ID
from flywheel.errors import NotFoundError
from routing.selection.state import RoutingState

ROUTED = "flywheel"
ROUTED_ALIASES = (ROUTED, "auto")
OWNER = "flywheel"


@dataclass(frozen=True)
class FlowModel:
    """A flow as a model: its id, and where it runs."""

    id: str
    backend: str
    backend_id: int
    flow: str
    flow_id: int
    kind: str


def flow_models(state: RoutingState, tenant_id: int) -> dict[str, FlowModel]:
    """The flows the tenant may run, by model id, in the order a listing shows them."""
    models: dict[str, FlowModel] = {}
    for backend in sorted(state.backends_for(tenant_id), key=lambda b: (b.name, b.id)):
        names = [f.name for f in backend.flows]
        for flow in sorted(backend.flows, key=lambda f: (f.name, f.id)):
            model_id = f"{backend.name}/{flow.name}"
            if names.count(flow.name) > 1:
                model_id += f"#{flow.id}"
            models[model_id] = FlowModel(
                model_id, backend.name, backend.id, flow.name, flow.id, backend.kind
            )
    return models


def model_named(state: RoutingState, tenant_id: int, model: str) -> FlowModel | None:
    """The flow ``model`` names; None for the routed model. Raises NotFoundError."""
    if model in ROUTED_ALIASES:
        return None
    found = flow_models(state, tenant_id).get(model)
    if found is None:
        raise NotFoundError(
            f"The model {model!r} does not exist: use {ROUTED!r} (routed by intent) or a "
            "flow's model from GET /v1/models.",
            details={"model": model[:200]},
        )
    return found


def flow_ref(state: RoutingState, tenant_id: int, ref: str) -> str:
    """The flow a compatible door's path names, as a query names it: its backend's id or
    Flywheel's, as given; else the backend's id of the flow of that name (case aside).
    An id no routable flow has is left to the query, which says why it cannot run (not
    deployed, not found). Raises NotFoundError for what could be neither."""
    backends = state.backends_for(tenant_id)
    flows = [f for b in backends for f in b.flows]
    if any(f.external_id == ref or str(f.id) == ref for f in flows):
        return ref
    named = [f for f in flows if f.name.lower() == ref.lower()]
    if named:
        return named[0].external_id
    if FLOW_ID.fullmatch(ref):
        return ref
    raise NotFoundError(f"No flow {ref[:200]!r}.", details={"flow": ref[:200]})

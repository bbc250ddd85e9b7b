"""What a flow's definition says of it, read at discovery: where a question's sampling
parameters can reach it, and what its nodes are.

A query may carry ``temperature`` and ``max_tokens``. Neither server takes them as
such: Langflow applies a run's ``tweaks`` to named components, and Flowise applies
``overrideConfig`` only to the node inputs its flow's API configuration lets callers
override (peers: without that, an override is silently ignored). So discovery reads
which of a flow's nodes take each parameter (``Tunable``), the adapter sends the
parameter there (``FlowBackend.tuned``), and an answer from a flow that cannot take
one says so (its ``warnings``) instead of ignoring it in silence.

``node_kinds`` are the flow's node types and labels, lower case, which chatflows reads
(with the flow's name and description) to derive its scope.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from backends.http import loads

# (parameter as a query names it, node id or label, the node's own field name)
Tunable = tuple[tuple[str, str, str], ...]

# The sampling parameters a query may carry, and the fields that take them in a
# Langflow component's template (OpenAI, Anthropic, Ollama, Hugging Face, ...).
LANGFLOW_FIELDS: Mapping[str, tuple[str, ...]] = {
    "temperature": ("temperature",),
    "max_tokens": ("max_tokens", "max_output_tokens", "num_predict", "max_new_tokens"),
}
# ... and the inputs that take them in a Flowise node.
FLOWISE_INPUTS: Mapping[str, str] = {"temperature": "temperature", "max_tokens": "maxTokens"}
SAMPLING = tuple(LANGFLOW_FIELDS)

MAX_NODES = 200  # of one flow: a larger definition is read no further
MAX_KIND_CHARS = 60


def _nodes(data: Any) -> list[Mapping[str, Any]]:
    if isinstance(data, str):  # Flowise's flowData travels as a JSON string
        try:
            data = loads(data)
        except ValueError:
            return []
    nodes = data.get("nodes") if isinstance(data, Mapping) else None
    if not isinstance(nodes, list):
        return []
    return [n for n in nodes[:MAX_NODES] if isinstance(n, Mapping)]


def _node_data(node: Mapping[str, Any]) -> Mapping[str, Any]:
    data = node.get("data")
    return data if isinstance(data, Mapping) else {}


def langflow_tunable(data: Any) -> Tunable:
    """The components of a Langflow flow whose template holds a sampling field."""
    found: list[tuple[str, str, str]] = []
    for node in _nodes(data):
        node_id = node.get("id")
        template = _node_data(node).get("node")
        template = template.get("template") if isinstance(template, Mapping) else None
        if not isinstance(node_id, str) or not isinstance(template, Mapping):
            continue
        for parameter, fields in LANGFLOW_FIELDS.items():
            field = next((f for f in fields if isinstance(template.get(f), Mapping)), None)
            if field is not None:
                found.append((parameter, node_id, field))
    return tuple(found)


def flowise_tunable(api_config: Any) -> Tunable:
    """The node inputs a Flowise chatflow's API configuration lets callers override,
    among those that take a sampling parameter (keyed by node label, as Flowise does)."""
    if isinstance(api_config, str):
        try:
            api_config = loads(api_config)
        except ValueError:
            return ()
    override = api_config.get("overrideConfig") if isinstance(api_config, Mapping) else None
    if not isinstance(override, Mapping) or override.get("status") is not True:
        return ()
    nodes = override.get("nodes")
    if not isinstance(nodes, Mapping):
        return ()
    found: list[tuple[str, str, str]] = []
    for label, inputs in nodes.items():
        if not isinstance(inputs, list):
            continue
        enabled = {
            i.get("name") for i in inputs if isinstance(i, Mapping) and i.get("enabled") is True
        }
        for parameter, name in FLOWISE_INPUTS.items():
            if name in enabled:
                found.append((parameter, str(label), name))
    return tuple(found)


def node_kinds(data: Any, keys: Iterable[str]) -> tuple[str, ...]:
    """The distinct values of ``keys`` in a flow's nodes' data (their types, names,
    labels, categories), lower case: what chatflows reads a flow's scope from."""
    kinds: list[str] = []
    for node in _nodes(data):
        node_data = _node_data(node)
        for key in keys:
            value = node_data.get(key)
            if isinstance(value, str) and value:
                kind = value.lower()[:MAX_KIND_CHARS]
                if kind not in kinds:
                    kinds.append(kind)
    return tuple(kinds)


def unapplied(parameters: Mapping[str, Any] | None, tunable: Tunable) -> list[str]:
    """The sampling parameters given that no node of the flow takes."""
    takes = {parameter for parameter, _, _ in tunable}
    return [p for p in SAMPLING if p in (parameters or {}) and p not in takes]


def as_tweaks(parameters: Mapping[str, Any] | None, tunable: Tunable) -> dict[str, Any]:
    """Langflow's way: ``parameters`` with temperature and max_tokens made tweaks of the
    components that take them (the caller's own tweak of the same field wins)."""
    given = dict(parameters or {})
    tweaks: dict[str, dict[str, Any]] = {}
    for parameter, node, field in tunable:
        if parameter in given:
            tweaks.setdefault(node, {})[field] = given[parameter]
    for parameter in SAMPLING:
        given.pop(parameter, None)
    if tweaks:
        theirs = dict(given.get("tweaks") or {})
        for node, fields in tweaks.items():
            own = theirs.get(node, {})
            if isinstance(own, Mapping):
                theirs[node] = {**fields, **own}
        given["tweaks"] = theirs
    return given

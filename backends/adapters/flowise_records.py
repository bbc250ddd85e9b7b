"""A Flowise chatflow record: its JSON-string fields both ways, and Flywheel's shapes of it.

Flowise stores ``flowData`` and a few other fields as JSON-encoded strings;
they are decoded on the way in and encoded on the way out. Of a record only
the seed-003 fields leave the adapter (FlowRecord): the rest may hold key ids
and webhook secrets.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Mapping
from typing import Any

from backends.adapters.base import DEFAULT_FLOW_TYPE, timestamp
from backends.adapters.records import DiscoveredFlow, FlowRecord
from backends.adapters.traits import flowise_tunable, node_kinds
from backends.http import loads

# Fields of a chatflow record that Flowise stores as JSON-encoded strings.
_JSON_STRING_FIELDS = ("flowData", "apiConfig", "chatbotConfig", "analytic", "speechToText")


def decode_record(record: dict[str, Any]) -> dict[str, Any]:
    """A chatflow record with its JSON-string fields decoded into objects."""
    decoded = dict(record)
    for name in _JSON_STRING_FIELDS:
        value = decoded.get(name)
        if isinstance(value, str) and value:
            # Keep what the server has if it is not JSON after all.
            with contextlib.suppress(ValueError):
                decoded[name] = loads(value)
    return decoded


def encode_fields(fields: Mapping[str, Any]) -> dict[str, Any]:
    """A create/update body with object values of JSON-string fields encoded."""
    body = dict(fields)
    for name in _JSON_STRING_FIELDS:
        if name in body and not isinstance(body[name], str | None):
            body[name] = json.dumps(body[name])
    return body


def discovered_flow(record: Mapping[str, Any]) -> DiscoveredFlow:
    return DiscoveredFlow(
        external_id=str(record["id"]),
        name=str(record.get("name") or record["id"]),
        flow_type=str(record.get("type") or DEFAULT_FLOW_TYPE),
        deployed=bool(record.get("deployed")),
        description=str(record.get("category") or ""),
        created=str(record.get("createdDate") or ""),
        tunable=flowise_tunable(record.get("apiConfig")),
        node_kinds=node_kinds(record.get("flowData"), ("name", "label", "category")),
    )


def flow_record(record: Mapping[str, Any]) -> FlowRecord:
    """A chatflow (decoded: see decode_record) as every door shows it."""
    return FlowRecord(
        id=str(record["id"]),
        name=str(record.get("name") or ""),
        type=str(record.get("type") or DEFAULT_FLOW_TYPE),
        deployed=bool(record.get("deployed")),
        description=str(record.get("category") or ""),
        created=timestamp(record.get("createdDate")),
        updated=timestamp(record.get("updatedDate")),
        flow_data=record.get("flowData"),
        discovered=discovered_flow(record),
    )

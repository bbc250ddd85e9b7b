"""A flow's record as an adapter hands it on, and the one check that it fits.

A tenant's backend may hold anything in a flow's record: a 400-character name, a
300-character id, a NUL character, a lone surrogate, a description of megabytes.
The Flow row cannot keep them (PostgreSQL refuses a NUL, a lone surrogate and a
value wider than its column) and JSON cannot carry a lone surrogate, so each
record is checked here as it leaves its adapter (backends/adapters/base.py: get,
create, update, list and discovery, for every kind). A record that does not fit
is refused by name, a BackendUnexpectedError (502) naming the backend and the
field, never a database error (500) on the way in. Discovery skips such a record
and counts it; the chatflow doors, asked for that one flow, refuse it.

The widths are the Flow row's: chatflows/models.py declares its columns from them.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from backends.adapters.traits import Tunable
from backends.errors import BackendUnexpectedError
from backends.http.limits import (
    FLOW_DATA_SETTING,
    RECORD_FIELD_SETTING,
    flow_data_max_bytes,
    record_field_max_bytes,
)
from flywheel.jsonin import string_problem

ID_CHARS = 200  # Flow.external_id
# A flow id as the backends make them (UUIDs, digits): it goes into a backend's URL path,
# so nothing that could leave that path ("/", "..", "?"). The chatflow doors take ids of
# this shape too (chatflows/contract.py).
FLOW_ID = re.compile(rf"[A-Za-z0-9][A-Za-z0-9_.:-]{{0,{ID_CHARS - 1}}}")
NAME_CHARS = 300  # Flow.name and Flow.endpoint_name
TYPE_CHARS = 30  # Flow.flow_type
_SHOWN_ID_CHARS = 80  # of a flow's id in an error or a log line


@dataclass(frozen=True)
class DiscoveredFlow:
    external_id: str
    name: str
    flow_type: str = ""
    deployed: bool = True
    description: str = ""
    endpoint_name: str = ""
    created: str = ""  # when the backend says it created the flow, as it wrote it ("": unsaid)
    # Where temperature and max_tokens can reach it, and its nodes' kinds (traits.py).
    tunable: Tunable = ()
    node_kinds: tuple[str, ...] = ()


@dataclass(frozen=True)
class FlowRecord:
    """A flow as its backend has it now, in the one shape every door shows (seed 003).

    Nothing else of the server's record leaves the adapter (Flowise keeps key
    ids and webhook secrets there). ``flow_data`` is the flow's definition as
    the server holds it, decoded (``{"nodes", "edges", ...}``), or None;
    ``discovered`` is what Flywheel's Flow row keeps of it, exactly as
    discovery would have stored it.
    """

    id: str
    name: str
    type: str
    deployed: bool
    description: str
    created: str | None
    updated: str | None
    flow_data: Any
    discovered: DiscoveredFlow


@dataclass(frozen=True)
class RecordProblem:
    """Why a record is refused: the field (named as the chatflow doors show it), how it
    fails (``too_large``, ``not_text``, ``not_an_id`` or ``blank``), in words, and the
    limit it passed.
    ``flow`` is the flow's id when the id itself is fine, else ""."""

    field: str
    failure: str
    words: str
    limit: Mapping[str, int | str] = dataclasses.field(default_factory=dict)
    flow: str = ""

    def error(self, *, label: str, backend: str) -> BackendUnexpectedError:
        """The refusal, in the one error shape (502)."""
        flow = f" {self.flow[:_SHOWN_ID_CHARS]!r}" if self.flow else ""
        details: dict[str, Any] = {"failure": self.failure, "field": self.field, **self.limit}
        if self.flow:
            details["flow"] = self.flow[:_SHOWN_ID_CHARS]
        return BackendUnexpectedError(
            f"{label} backend {backend!r} sent a flow{flow} that Flywheel cannot keep: "
            f"its {self.field} {self.words}.",
            backend=backend,
            details=details,
        )


def record_problem(record: FlowRecord) -> RecordProblem | None:
    """The first field of ``record`` (as shown, then as its Flow row keeps it) that does
    not fit, or None."""
    shown = [
        ("id", record.id, ID_CHARS),
        ("name", record.name, NAME_CHARS),
        ("type", record.type, TYPE_CHARS),
        ("description", record.description, None),
        ("createdDate", record.created or "", None),
        ("updatedDate", record.updated or "", None),
    ]
    return (
        _first_problem(record.id, shown)
        or _flow_data_problem(record.id, record.flow_data)
        or flow_problem(record.discovered)
    )


CREATED_CHARS = 64  # a date as a server writes it (Flow.backend_created)


def flow_problem(flow: DiscoveredFlow) -> RecordProblem | None:
    """The first field of a discovered flow that its Flow row cannot keep, or None."""
    kept = [
        ("id", flow.external_id, ID_CHARS),
        ("name", flow.name, NAME_CHARS),
        ("type", flow.flow_type, TYPE_CHARS),
        ("endpoint_name", flow.endpoint_name, NAME_CHARS),
        ("description", flow.description, None),
        ("createdDate", flow.created, CREATED_CHARS),
    ]
    return _first_problem(flow.external_id, kept)


def _first_problem(
    flow: str, fields: Iterable[tuple[str, str, int | None]]
) -> RecordProblem | None:
    """Each field's text checked, then its width: ``chars`` characters (a Flow column),
    or, where None, RECORD_FIELD_MAX_BYTES bytes of UTF-8. The id comes first, so a
    problem with any other field names a flow whose id is fine."""
    max_bytes = record_field_max_bytes()
    for name, value, chars in fields:
        named = "" if name == "id" else flow
        if name == "id" and not value:
            return RecordProblem(name, "blank", "is blank")
        if problem := string_problem(value):
            return RecordProblem(name, "not_text", problem, flow=named)
        if chars is not None and len(value) > chars:
            words = f"is longer than {chars} characters"
            return RecordProblem(name, "too_large", words, {"limit_chars": chars}, named)
        if name == "id" and not FLOW_ID.fullmatch(value):
            words = "is not a flow id (letters, digits, '-', '_', '.' or ':')"
            return RecordProblem(name, "not_an_id", words)
        if chars is None and len(value.encode("utf-8")) > max_bytes:
            return _too_large(name, max_bytes, RECORD_FIELD_SETTING, named)
    return None


def _flow_data_problem(flow: str, data: Any) -> RecordProblem | None:
    """flowData that the chatflow doors could not show, or past FLOW_DATA_MAX_BYTES as
    they show it (a JSON string: the server's own, or its object encoded)."""
    if data is None:
        return None
    if isinstance(data, str):
        if problem := string_problem(data):
            return RecordProblem("flowData", "not_text", problem, flow=flow)
        shown = data
    else:
        shown = json.dumps(data)  # as chatflows/lifecycle.py shows it: ASCII, escapes and all
    limit = flow_data_max_bytes()
    if len(shown.encode("utf-8")) > limit:
        return _too_large("flowData", limit, FLOW_DATA_SETTING, flow)
    return None


def _too_large(name: str, limit: int, setting: str, flow: str) -> RecordProblem:
    words = f"is larger than {limit} bytes ({setting})"
    return RecordProblem(name, "too_large", words, {"limit_bytes": limit, "setting": setting}, flow)

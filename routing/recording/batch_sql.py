"""A batch of decisions written by PostgreSQL itself, in one statement.

The ORM's bulk_create costs about 0.3 ms of Python per decision (model
instances, per-field preparation, parameter binding), and that Python runs
in the web process, under the same lock as the event loop that answers
questions. Here the batch goes over as one JSON document and PostgreSQL
unpacks it (``jsonb_to_recordset``) and inserts the sessions, decisions,
performance records and turns in a single statement, so the web process
spends a few microseconds per decision instead.

The rows are the same as the ORM path's (routing.recording.writer), which other
databases (SQLite, for ``make run``) keep using; tests run both on PostgreSQL.
A backend or flow deleted while its query was in flight is treated as its
foreign keys' delete rules would have treated the rows had they been
written first: references to it become NULL, and its performance records
(which cascade) are not written. Those references have no constraint in the
database (routing.models, RECORD_REFERENCE): the backends and flows a batch
refers to are locked against deletion first (FOR KEY SHARE, in one
statement), which is what a constraint's check did, in a trigger per reference and
row that cost as much as the inserts themselves.
A decision whose request id is stored already (a spooled decision replayed
after its process was killed between the commit and the spool's cleanup) is
skipped with its records and turn: replaying is idempotent. Its created_at is
the moment it was decided (DecisionData.created_at), the same in every replay,
so the unique key (request_id, created_at) finds it in its day's partition.
The other rows' timestamps come from ``clock_timestamp()``, so the turns of one
batch keep their order by time as well as by id. A decision that continues a one-shot
question (DecisionData.opening) starts its session with that question as the first
turn, dated when it was asked, unless the session was there before the statement
(which each part of it sees as it was then).

PostgreSQL stores no NUL character and no lone surrogate, in text or jsonb,
yet a backend's answer (or its error text) may hold either: :func:`storable`
turns each into U+FFFD, so an answered query is never left unrecorded.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from typing import Any

import psycopg
from django.db import connection
from django.db.backends.utils import CursorWrapper
from django.db.models import Model

from backends.models import Backend
from chatflows.models import Flow
from flywheel.fields import CompactJSONField, RealField, real_fit
from flywheel.jsonout import dumps
from routing.models import PerformanceRecord, RoutingDecision, Session, Turn
from routing.recording.decision import DecisionData

_SQL = """
WITH batch AS (
    SELECT * FROM jsonb_to_recordset(%s::jsonb) AS d(
        position int, {decision_types}, attempts jsonb, answer text, opening jsonb
    )
),
sessions AS (
    INSERT INTO {session} (id, tenant_id, created_at, updated_at)
    SELECT session_id, tenant_id, clock_timestamp(), clock_timestamp()
    FROM (SELECT DISTINCT session_id, tenant_id FROM batch WHERE session_id IS NOT NULL) AS s
    ON CONFLICT (id) DO UPDATE SET updated_at = EXCLUDED.updated_at
),
decisions AS (
    INSERT INTO {decision} ({decision_columns})
    SELECT {decision_values} FROM batch ORDER BY position
    ON CONFLICT (request_id, created_at) DO NOTHING
    RETURNING id, request_id
),
performance AS (
    INSERT INTO {performance}
        (backend_id, flow_id, decision_id, intent, latency_ms, success, error_type,
         prompt_tokens, completion_tokens, total_tokens, cost, created_at)
    SELECT attempt.backend_id, {live_attempt_flow}, decisions.id, batch.intent,
           (a->>'latency_ms')::float8, (a->>'ok')::boolean, a->>'error_type',
           (a->>'prompt_tokens')::integer, (a->>'completion_tokens')::integer,
           (a->>'total_tokens')::integer, (a->>'cost')::float8,
           COALESCE(to_timestamp(NULLIF((a->>'ended_at')::float8, 0)), clock_timestamp())
    FROM batch JOIN decisions USING (request_id)
    CROSS JOIN LATERAL jsonb_array_elements(batch.attempts) WITH ORDINALITY AS x(a, n)
    CROSS JOIN LATERAL (
        SELECT (a->>'backend_id')::bigint AS backend_id, (a->>'flow_id')::bigint AS flow_id
    ) AS attempt
    WHERE EXISTS (SELECT 1 FROM {backend} WHERE id = attempt.backend_id)
    ORDER BY batch.position, x.n
)
INSERT INTO {turn}
    (session_id, question, answer, intent, backend_id, flow_id, decision_id, created_at)
SELECT session_id, question, answer, intent, backend_id, flow_id, decision_id, created_at
FROM (
    (SELECT DISTINCT ON (batch.session_id) batch.position, 0 AS part, batch.session_id,
            o->>'question' AS question, o->>'answer' AS answer, o->>'intent' AS intent,
            {live_opening_backend} AS backend_id, {live_opening_flow} AS flow_id,
            (o->>'decision_id')::bigint AS decision_id,
            to_timestamp((o->>'created_at')::float8) AS created_at
     FROM batch CROSS JOIN LATERAL (SELECT batch.opening AS o) AS opening
     WHERE o IS NOT NULL AND batch.session_id IS NOT NULL
       AND NOT EXISTS (SELECT 1 FROM {session} WHERE id = batch.session_id)
     ORDER BY batch.session_id, batch.position)
    UNION ALL
    SELECT batch.position, 1, batch.session_id, batch.question, batch.answer, batch.intent,
           {live_backend}, {live_flow}, decisions.id, clock_timestamp()
    FROM batch JOIN decisions USING (request_id)
    WHERE batch.session_id IS NOT NULL AND batch.answer IS NOT NULL
) AS turns
ORDER BY position, part
"""


def _live(model: type[Model], value: str) -> str:
    """``value`` if a row of ``model`` has it as primary key, else NULL."""
    table, pk = model._meta.db_table, model._meta.pk.column
    # Names from the models and this module, never from input.
    return f"(SELECT {pk} FROM {table} WHERE {pk} = {value})"  # noqa: S608


@functools.cache
def _statement() -> str:
    """The statement, its decision columns and their types read off the model."""
    fields = [f for f in RoutingDecision._meta.concrete_fields if f.attname != "id"]
    # References to backends and flows that may have gone since the query started;
    # compact JSON, sent as its text (_row): jsonb_to_recordset would respace it.
    values = [
        _live(f.related_model, f"batch.{f.column}")
        if isinstance(f.related_model, type) and f.related_model in (Backend, Flow)
        else f"batch.{f.column}::json"
        if isinstance(f, CompactJSONField)
        else f"batch.{f.column}"
        for f in fields
    ]
    types = [
        f"{f.column} {'text' if isinstance(f, CompactJSONField) else f.db_type(connection)}"
        for f in fields
    ]
    return _SQL.format(
        session=Session._meta.db_table,
        decision=RoutingDecision._meta.db_table,
        performance=PerformanceRecord._meta.db_table,
        turn=Turn._meta.db_table,
        backend=Backend._meta.db_table,
        decision_columns=", ".join(f.column for f in fields),
        decision_values=", ".join(values),
        decision_types=", ".join(types),
        live_attempt_flow=_live(Flow, "attempt.flow_id"),
        live_backend=_live(Backend, "batch.backend_id"),
        live_flow=_live(Flow, "batch.flow_id"),
        live_opening_backend=_live(Backend, "(o->>'backend_id')::bigint"),
        live_opening_flow=_live(Flow, "(o->>'flow_id')::bigint"),
    )


# Any surrogate in a Python str is one UTF-8 cannot encode (pairs are single code points).
_UNSTORABLE = re.compile(r"[\x00\ud800-\udfff]")
# How the encoders write them (a NUL always escaped; a lone surrogate escaped by the
# standard library, which flywheel.jsonout falls back to for it): a document without
# these needs no cleaning.
_UNSTORABLE_ESCAPES = (b"\\u0000", b"\\ud")


def storable(value: Any) -> Any:
    """``value`` with NUL characters and lone surrogates replaced by U+FFFD in every
    string, dict keys included (dicts and lists are copied; other values kept as is)."""
    if isinstance(value, str):
        return _UNSTORABLE.sub("\ufffd", value)
    if isinstance(value, dict):
        return {storable(key): storable(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [storable(item) for item in value]
    return value


def _json_text(value: Any) -> str:
    """``value`` as compact JSON text, :func:`storable`."""
    text = dumps(value, default=str)
    if any(escape in text for escape in _UNSTORABLE_ESCAPES):
        text = dumps(storable(value), default=str)
    return text.decode()


@functools.cache
def _compact_json() -> tuple[str, ...]:
    """The decision's columns kept as compact JSON text (flywheel.fields.CompactJSONField)."""
    fields = RoutingDecision._meta.concrete_fields
    return tuple(f.attname for f in fields if isinstance(f, CompactJSONField))


@functools.cache
def _reals() -> tuple[str, ...]:
    """The decision's columns kept as real (flywheel.fields.RealField)."""
    fields = RoutingDecision._meta.concrete_fields
    return tuple(f.attname for f in fields if isinstance(f, RealField))


def _row(position: int, data: DecisionData) -> dict[str, Any]:
    columns = data.decision_columns()
    for name in _compact_json():
        columns[name] = _json_text(columns[name])
    for name in _reals():
        columns[name] = real_fit(columns[name])
    return {
        "position": position,
        **columns,
        "attempts": [
            {
                "backend_id": a.backend_id,
                "flow_id": a.flow_id,
                "latency_ms": real_fit(a.latency_ms),
                "ok": a.ok,
                "error_type": a.error_type,
                "prompt_tokens": a.prompt_tokens,
                "completion_tokens": a.completion_tokens,
                "total_tokens": a.total_tokens,
                "cost": a.cost,
                "ended_at": a.ended_at,
            }
            for a in data.attempts
            if a.measured  # an attempt the budget cut short says nothing of the backend
        ],
        "answer": data.answer,
        "opening": data.opening,
    }


# The backends and flows a batch refers to, locked against deletion until it commits.
_LOCK = """
SELECT id FROM (SELECT id FROM {backend} WHERE id = ANY(%s) FOR KEY SHARE) AS b
UNION ALL
SELECT id FROM (SELECT id FROM {flow} WHERE id = ANY(%s) FOR KEY SHARE) AS f
"""


def _ids(values: set[int | None]) -> list[int]:
    return sorted(v for v in values if v is not None)


def bound_cursor() -> CursorWrapper:
    """A cursor of the current connection that sends its parameters apart from the
    SQL (psycopg's own cursor; Django's quotes them into the text, in Python).

    For the writer's statements: a batch's document (tens of kilobytes) goes
    over as it is, and after a few runs on a pooled connection psycopg has
    PostgreSQL prepare the statement, so it is neither parsed nor planned again.
    Wrapped as connection.cursor() wraps its own: Django's errors, and the
    queries logged where Django logs them.
    """
    connection.ensure_connection()
    raw: Any = psycopg.Cursor(connection.connection)  # Django's wrappers take any DB-API cursor
    if connection.queries_logged:
        return connection.make_debug_cursor(raw)
    return connection.make_cursor(raw)


def referred(batch: Sequence[DecisionData]) -> tuple[set[int | None], set[int | None]]:
    """The backends and the flows the batch's rows refer to."""
    backends = {d.backend_id for d in batch} | {a.backend_id for d in batch for a in d.attempts}
    flows = {d.flow_id for d in batch} | {a.flow_id for d in batch for a in d.attempts}
    for opening in (d.opening for d in batch if d.opening):
        backends.add(opening["backend_id"])
        flows.add(opening["flow_id"])
    return backends, flows


def decisions_insert(batch: Sequence[DecisionData]) -> None:
    """Insert the batch's sessions (or move their updated_at on), decisions, performance
    records and turns. Runs inside the caller's transaction; raises the database's error."""
    rows = [_row(i, data) for i, data in enumerate(batch)]
    # default=str: what is not plain JSON already (nothing, at present)
    document = dumps(rows, default=str)
    if any(escape in document for escape in _UNSTORABLE_ESCAPES):  # rare: clean, then again
        document = dumps(storable(rows), default=str)
    backends, flows = referred(batch)
    with bound_cursor() as cursor:
        # What a deletion of these must wait for; _live() then finds the ones still there.
        lock = _LOCK.format(backend=Backend._meta.db_table, flow=Flow._meta.db_table)
        cursor.execute(lock, [_ids(backends), _ids(flows)])
        cursor.execute(_statement(), [document.decode()])


# The last attempts of several backends + intents, each its own indexed read (the
# index on backend, intent, -created_at), in one statement of fixed text: the ORM's
# UNION of one query per pair, compiled in Python on every batch, cost the writer
# more than the read itself.
_RECENT_SQL = """
SELECT pair.backend_id, pair.intent, r.flow_id, r.success, r.latency_ms, r.created_at,
       r.total_tokens
FROM unnest(%s::bigint[], %s::text[]) AS pair(backend_id, intent)
CROSS JOIN LATERAL (
    SELECT flow_id, success, latency_ms, created_at, total_tokens FROM {performance}
    WHERE backend_id = pair.backend_id AND intent = pair.intent AND created_at >= %s
    ORDER BY created_at DESC LIMIT %s
) AS r
"""


def recent_attempts(
    pairs: Sequence[tuple[int, str]], since: Any, window: int
) -> list[tuple[int, str, int | None, bool, float, Any, int | None]]:
    """Each pair's last ``window`` attempts since ``since``: (backend id, intent, flow id,
    success, latency_ms, created_at, total_tokens) rows, in no particular order."""
    sql = _RECENT_SQL.format(performance=PerformanceRecord._meta.db_table)
    with bound_cursor() as cursor:
        cursor.execute(sql, [[b for b, _ in pairs], [i for _, i in pairs], since, window])
        return list(cursor.fetchall())

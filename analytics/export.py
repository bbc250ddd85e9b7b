"""Decisions and performance records written out for the long term, and read back.

:func:`decisions_export` writes the rows of both tables made in a window of time
(``since <= created_at < until``, optionally one tenant's) as two gzip-compressed
JSON Lines files side by side, ``decisions-<since>-<until>[-<tenant>].jsonl.gz``
and ``performance-...``: one JSON object per row, keyed by column (``tenant_id``
for the tenant), with every concrete field of the model (read off ``_meta``, so a
new column is exported without a change here), datetimes in ISO 8601 UTC, UUIDs as
strings, JSON fields as nested JSON, NULL as null: what warehouses load as it is
(BigQuery, Snowflake, ClickHouse and DuckDB read gzipped JSON Lines).

Rows are read a page at a time, by primary key within the window: the primary
key is the one index both tables have (performance records have none on
``created_at``), so each page is a short range read and memory holds one page.
Each file is written under a temporary name beside its final one and renamed
(after an fsync) only once both are complete: an export that fails half-way
leaves no file behind, and one that succeeded is on disk before the operator
drops what it holds.

:func:`decisions_import` reads an export back, all or nothing: a decision whose
request id is stored already is skipped (so is a performance record whose id
is), so importing twice adds nothing. Rows keep their ids, which the database
issued once and never again: restoring a dropped day puts each row back where
it was, with the references between decisions and their performance records.
"""

from __future__ import annotations

import gzip
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, date, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any
from uuid import UUID

import orjson
from django.core.exceptions import ValidationError as FieldValueError
from django.db import connection, transaction
from django.db.models import ForeignKey, Max, Min, Model, QuerySet
from django.db.models.sql import InsertQuery

from flywheel.errors import ValidationError
from flywheel.jsonout import dumps
from flywheel.models import Tenant
from routing.models import PerformanceRecord, RoutingDecision

# The two tables of an export, by the name their file begins with.
TABLES: dict[str, type[Model]] = {"decisions": RoutingDecision, "performance": PerformanceRecord}
# What says a row of an export is stored already: a decision's request id, a record's id.
IMPORT_KEYS = {"decisions": "request_id", "performance": "id"}
DEFAULT_BATCH = 5000
SUFFIX = ".jsonl.gz"
COMPRESS_LEVEL = 6  # gzip's own default: a third faster than 9 for a few percent more bytes


@dataclass(frozen=True)
class TableFile:
    """One table's file of an export: where it is, its rows and its size in bytes."""

    table: str
    path: Path
    rows: int
    bytes: int


@dataclass(frozen=True)
class TableImport:
    """One table's file read back: rows stored, and rows skipped as stored already."""

    table: str
    path: Path
    added: int
    skipped: int


def moment_parse(text: str) -> datetime:
    """An ISO 8601 date or datetime (``2026-11-01``, ``2026-11-01T06:00+02:00``), as an
    aware datetime; one without an offset is UTC. Raises ValueError for anything else."""
    moment = datetime.fromisoformat(text.strip())
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def decisions_export(
    *,
    since: datetime,
    until: datetime,
    out: Path,
    tenant: Tenant | None = None,
    batch: int = DEFAULT_BATCH,
) -> list[TableFile]:
    """Write the decisions and performance records created from ``since`` up to (not
    including) ``until`` into ``out``, as gzip-compressed JSON Lines; with a tenant, its
    decisions and their performance records only. ``batch``: rows per read.

    Raises ValidationError, having written nothing, for an empty window, a batch under
    1 or an export of that name there already (moving one aside is the operator's
    call); OSError when ``out`` cannot be written.
    """
    if since >= until:
        raise ValidationError(
            f"since ({since.isoformat()}) is not before until ({until.isoformat()})."
        )
    if batch < 1:
        raise ValidationError("batch must be at least 1.")
    targets = _paths(out=out, since=since, until=until, tenant=tenant)
    if there := [target for target in targets if target.exists()]:
        raise ValidationError(f"{there[0]} exists already: move it away to export again.")
    out.mkdir(parents=True, exist_ok=True)
    written = []
    with _staged(targets) as temps:
        for (table, model), temp, target in zip(TABLES.items(), temps, targets, strict=True):
            rows = _rows(table, model, since=since, until=until, tenant=tenant)
            count = _table_write(temp, name=target.name, pages=_pages(rows, batch=batch))
            written.append((table, target, count))
    return [
        TableFile(table=table, path=target, rows=count, bytes=target.stat().st_size)
        for table, target, count in written
    ]


def decisions_import(*, path: Path, batch: int = DEFAULT_BATCH) -> list[TableImport]:
    """Read the export ``path`` names (either of its two files) back into the tables, in
    one transaction. Rows stored already are skipped: a decision by its request id, a
    performance record by its id.

    Raises ValidationError, having stored nothing, for a file missing or unreadable, a
    row that does not fit its table, a decision whose id another decision has here, or
    a row of a tenant this database does not have (import the tenants first).
    """
    if batch < 1:
        raise ValidationError("batch must be at least 1.")
    paths = _pair(path)
    if missing := [each for each in paths if not each.is_file()]:
        raise ValidationError(f"{missing[0]} is not there: an export is two files side by side.")
    reports = []
    with transaction.atomic():
        for (table, model), each in zip(TABLES.items(), paths, strict=True):
            added = skipped = 0
            top: int | None = None
            for objs in _read(each, model=model, batch=batch):
                fresh = _unstored(table, model, objs, source=each)
                _insert_as_is(model, fresh)
                added, skipped = added + len(fresh), skipped + len(objs) - len(fresh)
                top = max(top or 0, *(obj.pk for obj in objs))
            if top is not None:
                _sequence_past(model, top)
            reports.append(TableImport(table=table, path=each, added=added, skipped=skipped))
    return reports


def _paths(
    *, out: Path, since: datetime, until: datetime, tenant: Tenant | None = None
) -> list[Path]:
    """Where the export of this window (and tenant) goes: one file per table, in ``out``."""
    span = f"{_stamp(since)}-{_stamp(until)}" + (f"-{tenant.slug}" if tenant else "")
    return [out / f"{table}-{span}{SUFFIX}" for table in TABLES]


def _pair(path: Path) -> list[Path]:
    """Both files of the export one of them is (by name). Raises ValidationError for a
    name no export has."""
    for table in TABLES:
        if path.name.startswith(f"{table}-") and path.name.endswith(SUFFIX):
            span = path.name.removeprefix(f"{table}-")
            return [path.with_name(f"{each}-{span}") for each in TABLES]
    names = " or ".join(f"{table}-<since>-<until>{SUFFIX}" for table in TABLES)
    raise ValidationError(f"{path.name} is not an export's file (they are named {names}).")


def _stamp(moment: datetime) -> str:
    """A moment in a file name: ISO 8601's basic format, in UTC (20261101T000000Z)."""
    return moment.astimezone(UTC).strftime("%Y%m%dT%H%M%SZ")


def _rows(
    table: str, model: type[Model], *, since: datetime, until: datetime, tenant: Tenant | None
) -> QuerySet[Any]:
    rows = model._default_manager.filter(created_at__gte=since, created_at__lt=until)
    if tenant is None:
        return rows
    # A performance record is the tenant's through its decision.
    return rows.filter(**{"tenant" if table == "decisions" else "decision__tenant": tenant})


def _pages(rows: QuerySet[Any], *, batch: int) -> Iterator[list[dict[str, Any]]]:
    """``rows`` as dicts of every concrete field, ``batch`` at a time in primary-key
    order (keyset pagination: each page starts after the last key of the one before,
    up to the highest key there was when the first page was read)."""
    meta = rows.model._meta
    pk = meta.pk.attname
    bounds = rows.aggregate(low=Min(pk), high=Max(pk))
    if bounds["low"] is None:
        return
    page_rows = rows.filter(**{f"{pk}__lte": bounds["high"]}).order_by(pk)
    fields = [field.attname for field in meta.concrete_fields]
    after = bounds["low"] - 1
    while page := list(page_rows.filter(**{f"{pk}__gt": after}).values(*fields)[:batch]):
        yield page
        if len(page) < batch:
            return
        after = page[-1][pk]


def _json_value(value: Any) -> Any:
    """What orjson does not write itself, should the standard library's encoder write a
    row (jsonout.dumps' fallback), written as orjson would."""
    if isinstance(value, datetime):
        return value.astimezone(UTC).isoformat()
    if isinstance(value, date | UUID | Decimal):
        return str(value)
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


def _table_write(temp: Path, *, name: str, pages: Iterator[list[dict[str, Any]]]) -> int:
    """Write ``pages`` to ``temp`` as gzipped JSON Lines (the gzip header names the file
    ``name``, without a time: the same rows give the same bytes); fsync it. Its rows."""
    count = 0
    with (
        temp.open("wb") as raw,
        gzip.GzipFile(name, mode="wb", fileobj=raw, compresslevel=COMPRESS_LEVEL, mtime=0) as gz,
    ):
        for page in pages:
            gz.write(b"".join(dumps(row, default=_json_value) + b"\n" for row in page))
            count += len(page)
        gz.close()  # writes the gzip trailer into raw
        raw.flush()
        os.fsync(raw.fileno())
    return count


@contextmanager
def _staged(targets: list[Path]) -> Iterator[list[Path]]:
    """A temporary file beside each target: renamed onto its target when the block ends,
    all deleted if it raises."""
    temps: list[Path] = []
    try:
        for target in targets:
            handle, name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.")
            os.close(handle)
            temps.append(Path(name))
        yield temps
    except BaseException:
        for temp in temps:
            temp.unlink(missing_ok=True)
        raise
    for temp, target in zip(temps, targets, strict=True):
        temp.replace(target)
    directory = os.open(targets[0].parent, os.O_RDONLY)
    try:
        os.fsync(directory)  # the renames too are on disk
    finally:
        os.close(directory)


def _read(path: Path, *, model: type[Model], batch: int) -> Iterator[list[Model]]:
    """The rows of one export file as unsaved instances of ``model``, ``batch`` at a time.
    A column the model no longer has is left out; one it has gained takes its default."""
    fields = {field.attname: field for field in model._meta.concrete_fields}
    objs: list[Model] = []
    try:
        with gzip.open(path, "rb") as lines:
            for number, line in enumerate(lines, start=1):
                try:
                    row = orjson.loads(line)
                    objs.append(
                        model(**{k: fields[k].to_python(v) for k, v in row.items() if k in fields})
                    )
                except FieldValueError as err:
                    said = "; ".join(err.messages)
                    raise ValidationError(f"{path.name}, line {number}: {said}") from err
                except (ValueError, TypeError, AttributeError) as err:
                    raise ValidationError(f"{path.name}, line {number}: {err}") from err
                if len(objs) == batch:
                    yield objs
                    objs = []
    except (OSError, EOFError) as err:  # not gzip, or cut short
        raise ValidationError(f"{path.name} cannot be read: {err}") from err
    if objs:
        yield objs


def _unstored(table: str, model: type[Model], objs: list[Model], *, source: Path) -> list[Model]:
    """The rows of ``objs`` not stored yet. Raises ValidationError for a row whose id
    another row has, or that refers to a row a database constraint requires and this
    database does not have (a tenant)."""
    key = IMPORT_KEYS[table]
    manager = model._default_manager
    # Unordered reads (order_by()): the models' ordering by created_at would have
    # PostgreSQL walk that index for a LIMIT instead of looking the keys up.
    keys = [getattr(obj, key) for obj in objs]
    stored = set(manager.filter(**{f"{key}__in": keys}).order_by().values_list(key, flat=True))
    fresh = [obj for obj in objs if getattr(obj, key) not in stored]
    if key != model._meta.pk.attname:  # else no row of fresh has a stored id
        taken = manager.filter(pk__in=[obj.pk for obj in fresh]).order_by()
        if clash := list(taken.values_list("pk", key)[:1]):
            [(pk, other)] = clash
            raise ValidationError(
                f"{source.name}: id {pk} is another row's here ({key} {other}): import "
                "into a database that does not have it."
            )
    for field in model._meta.concrete_fields:
        if isinstance(field, ForeignKey) and field.db_constraint:  # type: ignore[attr-defined]
            wanted = {getattr(obj, field.attname) for obj in fresh} - {None}
            target = field.related_model._default_manager  # type: ignore[union-attr]
            found = set(target.filter(pk__in=wanted).values_list("pk", flat=True))
            if absent := sorted(wanted - found):
                raise ValidationError(
                    f"{source.name}: no {field.name} with id {', '.join(map(str, absent[:5]))} "
                    f"here; import the {field.name}s first."
                )
    return fresh


def _insert_as_is(model: type[Model], objs: list[Model]) -> None:
    """Insert ``objs`` in one statement with every field as it is, ``created_at`` too: a
    raw insert, as loaddata's (bulk_create would stamp auto_now_add fields with now)."""
    if not objs:
        return
    query = InsertQuery(model)
    query.insert_values(model._meta.concrete_fields, objs, raw=True)
    query.get_compiler(using=connection.alias).execute_sql()


def _sequence_past(model: type[Model], top: int) -> None:
    """Move the sequence of ``model``'s ids past ``top`` if it is not yet (an import into
    a fresh database), so that the rows written next do not take imported ids. It only
    ever moves forward: the rows being written meanwhile keep theirs."""
    if connection.vendor != "postgresql":
        return  # SQLite's next id follows the highest stored
    table = connection.ops.quote_name(model._meta.db_table)
    column = model._meta.pk.column
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT setval(seq::regclass, %s) FROM pg_get_serial_sequence(%s, %s) AS seq "
            "WHERE nextval(seq::regclass) <= %s",
            [top, table, column, top],
        )

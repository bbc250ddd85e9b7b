"""Retention: the raw rows of each question are kept FLYWHEEL_RETENTION_DAYS, no longer.

Decisions, performance records and turns older than that go, and sessions idle for
as long (their turns went with them); the hourly rollups (analytics.rollups) stay,
so the analytics pages still compare backends over months. Beat runs
:func:`retention_apply` every hour:

- on PostgreSQL, where those tables are partitioned by day (flywheel.partitions),
  it makes the partitions of the next FLYWHEEL_PARTITIONS_AHEAD_DAYS days and drops
  each day's partition once the whole day is past the retention, a table at a time
  and in milliseconds; rows the default partition holds are deleted like SQLite's;
- on SQLite (the first run), it deletes the old rows in batches.

On PostgreSQL, beat also packs the indexes of each day that has passed, once
(:func:`retention_pack`, a task of its own, hourly): while a day is written, some
of them keep their pages half full.

Nothing is dropped that the rollups have not read yet: the cut never passes the
oldest decision still waiting for them.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from time import monotonic
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Min, Model
from django.utils import timezone

from analytics.models import RollupState
from flywheel import ids
from flywheel.errors import ApplicationError, ExpiredError, NotFoundError
from flywheel.partitions import (
    DEFAULT,
    is_partitioned,
    partitions,
    partitions_drop,
    partitions_ensure,
    partitions_pack,
)
from routing.models import PerformanceRecord, RoutingDecision, Session, Turn

logger = logging.getLogger(__name__)

# The tables partitioned by day, in the order they are cut (what refers to a decision,
# then the decision).
PARTITIONED: tuple[type[Model], ...] = (PerformanceRecord, Turn, RoutingDecision)
DELETE_BATCH = 5000  # rows a statement, where rows are deleted rather than dropped


def partitioned_tables() -> list[str]:
    """The tables of PARTITIONED that are partitioned here (none on SQLite)."""
    return [m._meta.db_table for m in PARTITIONED if is_partitioned(m._meta.db_table)]


def kept_since(now: datetime | None = None) -> datetime:
    """The oldest moment whose raw rows the retention keeps."""
    return (now or timezone.now()) - timedelta(days=settings.RETENTION_DAYS)


def expired(request_id: Any, now: datetime | None = None) -> datetime | None:
    """When a decision that is not stored was made, if that is before what the
    retention keeps (its row is gone for that reason); else None (it never was, or it
    is not a request id that tells its time)."""
    made = ids.uuid7_time(request_id)
    return made if made is not None and made < kept_since(now) else None


def decision_missing(request_id: Any) -> ApplicationError:
    """The error for a decision not found: ExpiredError (410) if its id says it was made
    before what the retention keeps, else NotFoundError."""
    details = {"request_id": str(request_id)}
    made = expired(request_id)
    if made is None:
        return NotFoundError(f"No decision {request_id}.", details=details)
    return ExpiredError(
        f"Decision {request_id} has expired: it was made on {made:%Y-%m-%d}, and decisions "
        f"are kept {settings.RETENTION_DAYS} days (FLYWHEEL_RETENTION_DAYS).",
        details={**details, "made_at": made.isoformat(), "kept_days": settings.RETENTION_DAYS},
    )


def _cut(now: datetime) -> datetime:
    """Where the raw rows are cut: the retention's limit, or the oldest decision the
    rollups have not read, if that is older."""
    state = RollupState.objects.filter(pk=1).first()
    last = state.last_decision_id if state else 0
    waiting = RoutingDecision.objects.filter(pk__gt=last).aggregate(oldest=Min("created_at"))
    oldest = waiting["oldest"]
    limit = kept_since(now)
    return min(limit, oldest) if oldest is not None else limit


def _delete_before(table: str, cut: datetime) -> int:
    """Delete the rows of ``table`` created before ``cut``, a batch a statement (each
    its own transaction: a short lock, and a failure keeps what was done)."""
    deleted = 0
    while True:
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(
                f"DELETE FROM {table} WHERE id IN (SELECT id FROM {table} "  # noqa: S608
                f"WHERE created_at < %s LIMIT {DELETE_BATCH})",
                [cut],
            )
            count = cursor.rowcount
        deleted += count
        if count < DELETE_BATCH:
            return deleted


def retention_apply(*, now: datetime | None = None) -> dict[str, Any]:
    """Make the days ahead, and drop (or delete) what is past the retention.

    Returns what it did: ``kept_since`` (where the raw rows now start),
    ``partitions_made`` and ``partitions_dropped`` (names), ``rows_deleted`` (per
    table) and ``sessions_deleted``. A partition that could not be dropped in time
    (its table busy past flywheel.partitions.LOCK_TIMEOUT) is logged and left for
    the next run.
    """
    now = now or timezone.now()
    cut = _cut(now)
    # From now on the rollups leave the buckets before the cut as they are.
    state, _ = RollupState.objects.get_or_create(pk=1)
    if state.raw_since is None or state.raw_since < cut:
        RollupState.objects.filter(pk=1).update(raw_since=cut)
    made: list[str] = []
    dropped: list[str] = []
    deleted: dict[str, int] = {}
    for model in PARTITIONED:
        table = model._meta.db_table
        if is_partitioned(table):
            today = now.date()
            made += partitions_ensure(
                table, today, today + timedelta(days=settings.PARTITIONS_AHEAD_DAYS)
            )
            try:
                dropped += partitions_drop(table, cut)
            except Exception as err:  # the next run tries again
                logger.warning("A partition of %s was not dropped: %s", table, err)
            table = DEFAULT.format(table=table)
        deleted[model._meta.db_table] = _delete_before(table, cut)
    sessions = 0
    while batch := list(
        Session.objects.filter(updated_at__lt=cut).values_list("pk", flat=True)[:DELETE_BATCH]
    ):
        # Their turns are older still, gone already: no cascade to look for.
        sessions += Session.objects.filter(pk__in=batch)._raw_delete(connection.alias)
    if dropped or any(deleted.values()) or sessions:
        logger.info(
            "Retention: kept since %s; dropped %s; deleted %s rows and %d sessions",
            cut.isoformat(),
            ", ".join(dropped) or "no partition",
            sum(deleted.values()),
            sessions,
        )
    return {
        "kept_since": cut,
        "partitions_made": made,
        "partitions_dropped": dropped,
        "rows_deleted": deleted,
        "sessions_deleted": sessions,
    }


# The advisory lock a packing run holds: one run at a time (a run may outlast beat's
# interval when FLYWHEEL_PACK_SECONDS is set past it).
PACK_LOCK = 0x666C7970  # "flyp"


def retention_pack(*, now: datetime | None = None, seconds: float | None = None) -> dict[str, Any]:
    """Pack the indexes of the days that have passed, the newest day first, for
    ``seconds`` at most (FLYWHEEL_PACK_SECONDS): see flywheel.partitions.partitions_pack.

    A day the retention drops within a day is left as it is. Runs outside a
    transaction (a rebuild that lets writes go on cannot run in one), one run at a
    time. Returns ``indexes_packed`` (names) and ``busy`` (another run held the
    lock: this one did nothing). An index that could not be packed is logged and
    tried again next run.
    """
    now = now or timezone.now()
    until = monotonic() + (settings.PACK_SECONDS if seconds is None else seconds)
    tables = partitioned_tables()
    if not tables:
        return {"indexes_packed": [], "busy": False}
    first = _cut(now).date() + timedelta(days=1)
    today = now.date()
    days = sorted(
        {p.day for table in tables for p in partitions(table) if p.day and first <= p.day < today},
        reverse=True,
    )
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_lock(%s)", [PACK_LOCK])
        if not cursor.fetchone()[0]:
            return {"indexes_packed": [], "busy": True}
    packed: list[str] = []
    try:
        for day in days:
            for table in tables:
                try:
                    packed += partitions_pack(table, day, day + timedelta(days=1), until=until)
                except Exception as err:  # the next run tries again
                    logger.warning("An index of %s was not packed: %s", table, err)
    finally:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_unlock(%s)", [PACK_LOCK])
    if packed:
        logger.info("Packed %d indexes: %s", len(packed), ", ".join(packed))
    return {"indexes_packed": packed, "busy": False}

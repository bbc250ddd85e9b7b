"""Tables partitioned by day on PostgreSQL, so old rows go a partition at a time.

A table that grows with every question (decisions, performance records, turns) is
partitioned by range of its ``created_at``, one partition per UTC day, named
``<table>_pYYYYMMDD``, plus a default partition (``<table>_default``) that takes
a row no day partition covers yet (beat fell behind): no write is ever refused
for want of a partition. Retention then drops a day's partition, which takes
milliseconds whatever it holds, instead of deleting its rows one by one (which
bloats the table and takes hours at a billion rows).

A partition is made as a table of its own and then attached: attaching locks the
parent table only against other schema changes (SHARE UPDATE EXCLUSIVE), where
``CREATE TABLE ... PARTITION OF`` would stop every read and write for the
moment. Rows the default partition took for that day move into it first.
Dropping one locks the parent for a moment; ``lock_timeout`` bounds the wait, so
retention never queues the writers behind a long query.

SQLite (the first run) has plain tables: every function here is for PostgreSQL.
Table names come from the models, never from input.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from time import monotonic
from typing import Any

from django.db import connection, transaction

DEFAULT = "{table}_default"
_DAY = re.compile(r"_p(\d{8})$")
# How long a schema change waits for the parent's lock before giving up (it is
# tried again at the next run): a query holding the table longer keeps it.
LOCK_TIMEOUT = "2s"


def _midnight(day: date) -> str:
    return datetime.combine(day, time(), UTC).isoformat()


def day_partition(table: str, day: date) -> str:
    return f"{table}_p{day:%Y%m%d}"


@dataclass(frozen=True)
class Partition:
    name: str
    day: date | None  # None: the default partition

    @property
    def end(self) -> datetime | None:
        """Where its range ends (the next midnight, UTC); None for the default one."""
        if self.day is None:
            return None
        return datetime.combine(self.day + timedelta(days=1), time(), UTC)


def is_partitioned(table: str) -> bool:
    if connection.vendor != "postgresql":
        return False
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT 1 FROM pg_partitioned_table WHERE partrelid = to_regclass(%s)", [table]
        )
        return cursor.fetchone() is not None


def partitions(table: str) -> list[Partition]:
    """The table's partitions, the default one first, then by day."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
            "WHERE i.inhparent = to_regclass(%s)",
            [table],
        )
        names = [row[0] for row in cursor.fetchall()]
    found = []
    for name in names:
        match = _DAY.search(name)
        day = datetime.strptime(match.group(1), "%Y%m%d").date() if match else None
        found.append(Partition(name, day))
    return sorted(found, key=lambda p: (p.day is not None, p.day or date.min))


def partitions_ensure(table: str, first: date, last: date) -> list[str]:
    """Make the day partitions from ``first`` to ``last`` (both included) that are
    missing; returns the names made. Each is made in a transaction of its own."""
    have = {p.day for p in partitions(table)}
    made = []
    day = first
    while day <= last:
        if day not in have:
            _attach_day(table, day)
            made.append(day_partition(table, day))
        day += timedelta(days=1)
    return made


def _attach_day(table: str, day: date) -> None:
    name, default = day_partition(table, day), DEFAULT.format(table=table)
    start, end = _midnight(day), _midnight(day + timedelta(days=1))
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(f"SET LOCAL lock_timeout = '{LOCK_TIMEOUT}'")
        # Its bounds as a constraint already: attaching then need not read it to check.
        cursor.execute(
            f"CREATE TABLE {name} (LIKE {table} INCLUDING DEFAULTS INCLUDING CONSTRAINTS, "
            f"CONSTRAINT {name}_bounds CHECK (created_at >= %s AND created_at < %s))",
            [start, end],
        )
        if _exists(default):  # rows taken while this day had no partition of its own
            cursor.execute(
                f"WITH moved AS (DELETE FROM {default} WHERE created_at >= %s "  # noqa: S608
                f"AND created_at < %s RETURNING *) INSERT INTO {name} SELECT * FROM moved",
                [start, end],
            )
        cursor.execute(
            f"ALTER TABLE {table} ATTACH PARTITION {name} FOR VALUES FROM (%s) TO (%s)",
            [start, end],
        )
        cursor.execute(f"ALTER TABLE {name} DROP CONSTRAINT {name}_bounds")


def _exists(name: str) -> bool:
    with connection.cursor() as cursor:
        cursor.execute("SELECT to_regclass(%s) IS NOT NULL", [name])
        row = cursor.fetchone()
    return bool(row and row[0])


def partitions_drop(table: str, before: datetime) -> list[str]:
    """Drop the day partitions that end at or before ``before``, in one statement (one
    lock of the parent, one commit); returns their names. Raises the database's error
    if the parent could not be locked within LOCK_TIMEOUT: none is dropped then, and
    the next run tries again."""
    old = [p.name for p in partitions(table) if p.end is not None and p.end <= before]
    if not old:
        return []
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(f"SET LOCAL lock_timeout = '{LOCK_TIMEOUT}'")
        # Checks of references written in the caller's transaction, deferred to its
        # commit, would keep the tables: they are made now.
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
        cursor.execute(f"DROP TABLE {', '.join(old)}")
    return old


# A packed index is marked by its comment, set once its rebuild has succeeded (a
# rebuild cut short leaves it unmarked: the next run rebuilds it).
PACKED = "flywheel: packed"
# What a REINDEX CONCURRENTLY cut short leaves behind: an invalid copy of the index,
# the new one (``<index>_ccnew``) or, if cut after the swap, the old one (``_ccold``).
_LEFTOVER = re.compile(r"_cc(new|old)\d*$")


def partition_indexes(cursor: Any, table: str) -> list[tuple[str, bool, bool]]:
    """The indexes of ``table``: name, whether valid, whether packed."""
    cursor.execute(
        "SELECT i.relname, x.indisvalid, obj_description(i.oid, 'pg_class') IS NOT DISTINCT "
        "FROM %s FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid "
        "WHERE x.indrelid = to_regclass(%s)",
        [PACKED, table],
    )
    return [(name, valid, packed) for name, valid, packed in cursor.fetchall()]


def partitions_pack(table: str, first: date, before: date, *, until: float) -> list[str]:
    """Rebuild the indexes of the day partitions from ``first`` to before ``before``
    that are not packed yet, the newest day first, their pages full; returns the
    names of the indexes packed.

    While its day is written, an index whose new entries go in the middle (the newest
    of each backend and intent in perf_backend_intent_recent) splits a full page in
    two halves, and leaves most of its pages half full: a rebuild, once the day has
    passed, takes about half the space. Each is rebuilt CONCURRENTLY, so reads and the
    odd late write go on meanwhile (outside a transaction: the caller must not be in
    one).

    ``until`` (a time.monotonic moment) bounds the work: no rebuild starts after
    it, and PostgreSQL cancels one still going then (statement_timeout), so the
    connection is never left mid-statement. A rebuild cancelled or failed is tried
    again next run; the invalid copy it left behind is dropped first. Raises what
    cut a rebuild short, once the indexes rebuilt before it are marked."""
    packed: list[str] = []
    days = [p for p in partitions(table) if p.day is not None and first <= p.day < before]
    for partition in reversed(days):
        with connection.cursor() as cursor:
            for name, valid, done in partition_indexes(cursor, partition.name):
                if not valid and _LEFTOVER.search(name):
                    if not _in_time(cursor, until, f"DROP INDEX CONCURRENTLY IF EXISTS {name}"):
                        return packed
                elif valid and not done and not _LEFTOVER.search(name):
                    if not _in_time(
                        cursor,
                        until,
                        f"ALTER INDEX {name} SET (fillfactor = 100)",
                        f"REINDEX INDEX CONCURRENTLY {name}",
                        f"COMMENT ON INDEX {name} IS '{PACKED}'",
                    ):
                        return packed
                    packed.append(name)
    return packed


def _in_time(cursor: Any, until: float, *statements: str) -> bool:
    """Run ``statements`` if there is a second left before ``until``, each cancelled
    by PostgreSQL if still going then; False if there was not."""
    for statement in statements:
        left = until - monotonic()
        if left < 1:
            return False
        cursor.execute(f"SET statement_timeout = '{int(left * 1000)}ms'")
        try:
            cursor.execute(statement)
        finally:
            cursor.execute("RESET statement_timeout")
    return True


Definitions = list[tuple[str, str]]


def _set_aside(cursor: Any, table: str, old: str) -> tuple[Definitions, Definitions, int]:
    """Rename ``table`` to ``old`` with its id sequence, once its keys (foreign and
    unique), its other indexes and its primary key are dropped (their names are the
    new table's); returns those keys' and indexes' definitions, and the next id."""
    cursor.execute("SELECT conname FROM pg_constraint WHERE confrelid = to_regclass(%s)", [table])
    if referring := [row[0] for row in cursor.fetchall()]:
        raise RuntimeError(f"{table} is referred to by constraints {referring}")
    cursor.execute(
        "SELECT conname, pg_get_constraintdef(oid) FROM pg_constraint "
        "WHERE conrelid = to_regclass(%s) AND contype IN ('f', 'u')",
        [table],
    )
    keys = cursor.fetchall()
    cursor.execute(
        "SELECT i.relname, pg_get_indexdef(x.indexrelid) FROM pg_index x "
        "JOIN pg_class i ON i.oid = x.indexrelid WHERE x.indrelid = to_regclass(%s) "
        "AND NOT x.indisprimary AND NOT EXISTS "
        "(SELECT 1 FROM pg_constraint c WHERE c.conindid = x.indexrelid)",
        [table],
    )
    indexes = cursor.fetchall()
    cursor.execute("SELECT pg_get_serial_sequence(%s, 'id')", [table])
    sequence = cursor.fetchone()[0]
    cursor.execute(f"SELECT COALESCE(max(id), 0) + 1 FROM {table}")  # noqa: S608
    next_id = int(cursor.fetchone()[0])
    for name, _ in keys:
        cursor.execute(f"ALTER TABLE {table} DROP CONSTRAINT {name}")
    for name, _ in indexes:
        cursor.execute(f"DROP INDEX {name}")
    cursor.execute(f"ALTER TABLE {table} DROP CONSTRAINT {table}_pkey")
    cursor.execute(f"ALTER TABLE {table} RENAME TO {old}")
    cursor.execute(f"ALTER SEQUENCE {sequence} RENAME TO {old}_id_seq")
    return keys, indexes, next_id


def partitioned_convert(table: str, first: date, last: date) -> None:
    """Turn a plain table into one partitioned by day on created_at, with its rows,
    columns, checks, indexes and foreign keys, its id counting on where it was (the
    migration's, inside its transaction). Its primary key becomes (id, created_at),
    and a unique index without created_at becomes a plain one: a partitioned table's
    unique keys must hold the partition key. Day partitions from ``first`` to ``last``
    and the default one are made; older rows land in the default one."""
    old = f"{table}_unpartitioned"
    with connection.cursor() as cursor:
        keys, indexes, next_id = _set_aside(cursor, table, old)
        cursor.execute(
            f"CREATE TABLE {table} (LIKE {old} INCLUDING DEFAULTS INCLUDING IDENTITY "
            f"INCLUDING CONSTRAINTS) PARTITION BY RANGE (created_at)"
        )
        cursor.execute(f"ALTER TABLE {table} ADD PRIMARY KEY (id, created_at)")
        cursor.execute(f"ALTER TABLE {table} ALTER COLUMN id RESTART WITH {int(next_id)}")
        cursor.execute(f"CREATE TABLE {DEFAULT.format(table=table)} PARTITION OF {table} DEFAULT")
    partitions_ensure(table, first, last)
    with connection.cursor() as cursor:
        cursor.execute(f"INSERT INTO {table} SELECT * FROM {old}")  # noqa: S608
        cursor.execute(f"DROP TABLE {old}")
        for name, definition in keys:
            if definition.startswith("UNIQUE") and "created_at" not in definition:
                columns = definition.removeprefix("UNIQUE ")
                cursor.execute(f"CREATE INDEX {name} ON {table} {columns}")
            else:
                cursor.execute(f"ALTER TABLE {table} ADD CONSTRAINT {name} {definition}")
        for _, definition in indexes:
            # "CREATE [UNIQUE] INDEX name ON public.table USING ...": on the new parent.
            definition = definition.replace(f" ON public.{table} ", f" ON {table} ")
            if definition.startswith("CREATE UNIQUE") and "created_at" not in definition:
                definition = definition.replace("CREATE UNIQUE INDEX", "CREATE INDEX", 1)
            cursor.execute(definition)


def partitioned_revert(table: str) -> None:
    """Turn a table partitioned by partitioned_convert back into a plain one, with its
    rows, columns, checks, indexes and foreign keys (the migration's way back): its
    primary key (id) again, and an index named as a unique constraint (``..._key``)
    unique again."""
    old = f"{table}_partitioned"
    with connection.cursor() as cursor:
        keys, indexes, next_id = _set_aside(cursor, table, old)
        cursor.execute(
            f"CREATE TABLE {table} (LIKE {old} INCLUDING DEFAULTS INCLUDING IDENTITY "
            f"INCLUDING CONSTRAINTS)"
        )
        cursor.execute(f"ALTER TABLE {table} ADD PRIMARY KEY (id)")
        cursor.execute(f"ALTER TABLE {table} ALTER COLUMN id RESTART WITH {int(next_id)}")
        cursor.execute(f"INSERT INTO {table} SELECT * FROM {old}")  # noqa: S608
        cursor.execute(f"DROP TABLE {old}")  # and its partitions
        for name, definition in keys:
            cursor.execute(f"ALTER TABLE {table} ADD CONSTRAINT {name} {definition}")
        for name, definition in indexes:
            if name.endswith("_key"):
                columns = definition[definition.index("(") :]
                cursor.execute(f"ALTER TABLE {table} ADD CONSTRAINT {name} UNIQUE {columns}")
            else:
                cursor.execute(definition)

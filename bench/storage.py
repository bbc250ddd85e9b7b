"""Storage per question: what answering N questions leaves in PostgreSQL and Redis.

The questions are answered in this process through the service every door uses
(routing.answering.service.answer_question, each validated by query_request as
the REST door does), CONCURRENCY at a time, against bench/standin.py (a
Flowise stand-in that echoes the question at once), registered and discovered
as an operator would register a backend, one of its flows made generic. Each
question carries a number so none repeats: the answer cache keeps one key per
distinct question, as production traffic would.

Two modes, measured one after the other on the same database:

- one-shot: no session id, the usual API call;
- conversations: sessions of TURNS questions, each after the first continuing
  the session the first answer returned.

For each mode: the sizes of every table before and after (after the decision
writer has drained, the rollups refreshed as beat would, and VACUUM ANALYZE,
so dead row versions are not counted): bytes per question per table that grew
(pg_total_relation_size, split into the main fork, TOAST and maps, and indexes),
and the Redis keys under this run's prefix by kind (``flywheel:session:...`` is
"session"): keys and MEMORY USAGE per question, and the median TTL of the new
ones. Then the average stored size (pg_column_size) of each column of the
mode's decision rows, and the totals per million questions (decimal GB). On
PostgreSQL, the tables' growth is measured again once today's partitions have
their indexes packed, as beat packs a day that has passed
(flywheel.partitions.partitions_pack): while a day is written, some indexes keep
their pages half full. The
stand-in's answers are short ("Echo: " and the question): a real answer adds
its length to the turn (compressed in TOAST beyond ~2 kB).

    bench/storage.py [--questions 2000] [--json]

Needs PostgreSQL and Redis (scripts/ensure_services.py); uses its own database,
flywheel_bench_storage_<checkout hash>, recreated on each run, and Redis DB 3
under the prefix bench_storage_<checkout hash>, whose keys alone it deletes (at
the start and once measured).
The classifiers are not trained (as bench/rest.py and bench/load.py): rules
classify, and the evidence they record is what is measured.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import (
    free_port,
    own_services,
    questions,
    recreate_database,
    start,
    wait_for,
)
from bench.storage_report import ROW, KeyKind, Mode, TableSize, as_json, key_kind, report

# The stand-in listens on loopback, which backends may not reach unless allowed.
PG, ENV = own_services("storage", FLYWHEEL_BACKEND_ALLOWED_NETWORKS="127.0.0.0/8")
CONCURRENCY = 16
TURNS = 5  # questions per conversation
# Each table's heap, TOAST and indexes; a partitioned table's are its partitions' summed.
SIZES_SQL = """
SELECT coalesce(parent.relname, c.relname),
       sum(pg_table_size(c.oid) - toast.bytes)::bigint, sum(toast.bytes)::bigint,
       sum(pg_indexes_size(c.oid))::bigint
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
LEFT JOIN pg_inherits i ON i.inhrelid = c.oid
LEFT JOIN pg_class parent ON parent.oid = i.inhparent
CROSS JOIN LATERAL (
    SELECT coalesce(pg_total_relation_size(nullif(c.reltoastrelid, 0)), 0) AS bytes
) toast
WHERE n.nspname = current_schema() AND c.relkind = 'r'
GROUP BY 1
"""


# --- Set-up ------------------------------------------------------------------------


def setup(standin_port: int) -> Any:
    """Install the defaults and register the stand-in, one flow generic; the tenant."""
    from backends.services import backend_create, backend_onboard
    from bench.learning_setup import forget_cache
    from chatflows.models import Flow
    from chatflows.services import flow_routing_set
    from flywheel.services import tenant_get_or_create_default
    from routing.install import defaults_load

    forget_cache()  # this prefix's keys only: the Redis is shared
    defaults_load()
    backend = backend_create(
        name="standin", kind="flowise", base_url=f"http://127.0.0.1:{standin_port}", trusted=True
    )
    onboarded = backend_onboard(backend=backend)
    flow = Flow.objects.filter(backend=backend, removed_at=None).order_by("name").first()
    if flow is None:
        raise RuntimeError(f"the stand-in's flows were not discovered: {onboarded}")
    flow_routing_set(flow=flow, is_generic=True)
    return tenant_get_or_create_default()


# --- Asking ------------------------------------------------------------------------


def distinct(n: int, tag: str) -> list[str]:
    """``n`` questions, none asked before in this run (``tag`` tells the runs' apart)."""
    base = questions(exclude=frozenset({"summarize", "conversation-query"}))
    return [f"{base[i % len(base)]} ({tag}{i})" for i in range(n)]


async def ask(tenant: Any, question: str, session_id: str | None = None) -> dict[str, Any]:
    from routing.answering.query_input import query_request
    from routing.answering.service import answer_question

    body: dict[str, Any] = {"question": question}
    if session_id is not None:
        body["session_id"] = session_id
    return await answer_question(query_request(body), tenant=tenant)


async def bounded(jobs: list[Callable[[], Awaitable[None]]]) -> None:
    """Run ``jobs``, CONCURRENCY at a time."""
    gate = asyncio.Semaphore(CONCURRENCY)

    async def one(job: Callable[[], Awaitable[None]]) -> None:
        async with gate:
            await job()

    await asyncio.gather(*(one(job) for job in jobs))


def one_shot(tenant: Any, pool: list[str]) -> None:
    def job(question: str) -> Callable[[], Awaitable[None]]:
        async def go() -> None:
            await ask(tenant, question)

        return go

    asyncio.run(bounded([job(q) for q in pool]))


def conversations(tenant: Any, pool: list[str]) -> None:
    def job(turns: list[str]) -> Callable[[], Awaitable[None]]:
        async def go() -> None:
            session_id = None
            for question in turns:
                answer = await ask(tenant, question, session_id)
                session_id = str(answer["session_id"])

        return go

    chunks = [pool[i : i + TURNS] for i in range(0, len(pool), TURNS)]
    asyncio.run(bounded([job(chunk) for chunk in chunks]))


# --- Measuring ---------------------------------------------------------------------


def settle() -> None:
    """Every decision written, the rollups brought up to date, dead row versions vacuumed."""
    from django.db import connection

    from analytics.rollups import rollups_refresh
    from routing.recording.writer import drain

    drain()
    rollups_refresh()
    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE")


def table_sizes() -> dict[str, TableSize]:
    from django.db import connection

    sizes = {}
    with connection.cursor() as cursor:
        cursor.execute(SIZES_SQL)
        for name, heap, toast, indexes in cursor.fetchall():
            cursor.execute(f'SELECT count(*) FROM "{name}"')  # noqa: S608 - names from pg_class
            sizes[name] = TableSize(cursor.fetchone()[0], heap, toast, indexes)
    return sizes


def redis_keys() -> dict[str, tuple[str, int, int]]:
    """This prefix's keys: each one's kind, MEMORY USAGE and TTL (seconds; -1: none)."""
    from django.core.cache import cache

    client = cache._cache.get_client(write=True)  # type: ignore[attr-defined]
    prefix = cache.make_key("")
    keys = list(client.scan_iter(match=cache.make_key("*"), count=1000))
    pipe = client.pipeline(transaction=False)
    for key in keys:
        pipe.memory_usage(key, samples=0)
        pipe.ttl(key)
    found = pipe.execute()
    return {
        key.decode(): (key_kind(key.decode()[len(prefix) :]), found[2 * i] or 0, found[2 * i + 1])
        for i, key in enumerate(keys)
    }


def grown_keys(
    before: dict[str, tuple[str, int, int]], after: dict[str, tuple[str, int, int]]
) -> dict[str, KeyKind]:
    """Per kind: the change in keys and memory, and the TTLs of the keys that are new."""
    kinds: dict[str, KeyKind] = {}
    for keys, sign in ((after, 1), (before, -1)):
        for key, (kind, memory, ttl) in keys.items():
            was = kinds.get(kind, KeyKind())
            new = sign > 0 and key not in before and ttl >= 0
            kinds[kind] = KeyKind(
                was.keys + sign, was.memory + sign * memory, was.ttls + ((ttl,) if new else ())
            )
    return {kind: k for kind, k in kinds.items() if k.keys or k.memory}


def decision_columns(after_id: int) -> dict[str, float]:
    """Average pg_column_size of each column of the decisions past ``after_id``, and of
    the whole row ("(row)")."""
    from django.db import connection

    from routing.models import RoutingDecision

    table = RoutingDecision._meta.db_table
    columns = [f.column for f in RoutingDecision._meta.concrete_fields]
    averages = ", ".join(f'avg(pg_column_size(d."{c}"))' for c in columns)
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT {averages}, avg(pg_column_size(d.*)) FROM {table} d WHERE d.id > %s",  # noqa: S608
            [after_id],
        )
        row = cursor.fetchone()
    return {name: float(v or 0) for name, v in zip([*columns, ROW], row, strict=True)}


def measured(name: str, run: Callable[[], None], n: int) -> Mode:
    from django.db.models import Max

    from routing.models import RoutingDecision

    last_id = RoutingDecision.objects.aggregate(last=Max("id"))["last"] or 0
    tables, keys = table_sizes(), redis_keys()
    started = time.perf_counter()
    run()
    seconds = time.perf_counter() - started
    settle()
    grown = grown_since(tables)
    redis, columns = grown_keys(keys, redis_keys()), decision_columns(last_id)
    packed = grown_since(tables) if pack_today() else {}
    return Mode(name, n, seconds, grown, redis, columns, packed)


def grown_since(before: dict[str, TableSize]) -> dict[str, TableSize]:
    """What each table that grew since ``before`` grew by."""
    after = table_sizes()
    return {
        table: size.minus(before.get(table, TableSize()))
        for table, size in after.items()
        if size != before.get(table, TableSize())
    }


def pack_today() -> bool:
    """Pack today's partitions' indexes as beat packs a day that has passed; False
    where nothing is partitioned."""
    from datetime import timedelta
    from time import monotonic

    from django.db import connection
    from django.utils import timezone

    from analytics.retention import partitioned_tables
    from flywheel.partitions import (
        day_partition,
        partition_indexes,
        partitions_pack,
    )

    today = timezone.now().date()
    tables = partitioned_tables()
    with connection.cursor() as cursor:  # packed after an earlier mode: pack them again
        for table in tables:
            for index, _, _ in partition_indexes(cursor, day_partition(table, today)):
                cursor.execute(f"COMMENT ON INDEX {index} IS NULL")
    for table in tables:
        partitions_pack(table, today, today + timedelta(days=1), until=monotonic() + 3600)
    return bool(tables)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--questions", type=int, default=2000, help="per mode")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    os.environ.update(ENV)
    recreate_database(PG)
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", "--noinput", verbosity=0)
    n = args.questions
    port = free_port()
    standin = start(["bench/standin.py", str(port), "0"])
    try:
        wait_for(f"http://127.0.0.1:{port}/api/v1/ping")
        tenant = setup(port)
        one_shot(tenant, distinct(CONCURRENCY * 2, "w"))  # warm: connections, routing state
        settle()
        modes = [
            measured("one-shot (no session id)", lambda: one_shot(tenant, distinct(n, "a")), n),
            measured(
                f"conversations ({TURNS} turns each)",
                lambda: conversations(tenant, distinct(n, "c")),
                n,
            ),
        ]
    finally:
        standin.terminate()
        standin.wait(timeout=20)
    from bench.learning_setup import forget_cache

    forget_cache()  # a day-long key per session would outlive the run in a shared Redis
    if args.json:
        print(json.dumps(as_json(modes), indent=2))
    else:
        prefix = ENV["FLYWHEEL_CACHE_PREFIX"]
        print(f"Database {PG.rsplit('/', 1)[1]} (recreated), Redis prefix {prefix}")
        print(report(modes))


if __name__ == "__main__":
    main()

"""Retention on partitioned tables: 40 days of rows, the old days dropped while
questions keep being recorded and read.

Makes 40 days of day partitions for decisions, performance records and turns (the
days ahead too, as beat does), fills each day with ``--rows-per-day`` synthetic
decisions, each with a performance record and a turn (PostgreSQL's
generate_series: the rows are not routed), rolls them up, then runs the
retention (FLYWHEEL_RETENTION_DAYS, 30 here) while another connection keeps
writing decisions and reading them back (the tenant's newest decisions, and a
backend's recent attempts, as routing reads them). Prints the drop's time in all
and per partition, and the latencies of the queries answered before and while it
ran.

Needs PostgreSQL (a database of its own, recreated). ``--rows-per-day`` (10,000 by
default) sizes the days; the drop's time does not grow with it, deleting would.
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import own_services, percentile, recreate_database

DAYS = 40
RETENTION_DAYS = 30
PG, ENV = own_services("retention", FLYWHEEL_RETENTION_DAYS=str(RETENTION_DAYS))

FILL_SQL = """
WITH d AS (
    INSERT INTO analytics_routingdecision
        (request_id, tenant_id, question, intent, intent_method, query_type, evidence,
         routing_method, backend_id, score, candidates, fallback_chain, outcome,
         error_type, error_message, corrected_intent, classify_ms, route_ms, execute_ms,
         total_ms, created_at)
    SELECT gen_random_uuid(), %(tenant)s, 'Please review my pull request ' || n,
           'code-review', 'rules', 'LOCAL', '{}', 'auto', %(backend)s, 0.8, '[]', '[]',
           'success', '', '', '', 1, 1, 100, 102,
           %(day)s::timestamptz + (n * interval '86399 seconds' / %(rows)s)
    FROM generate_series(1, %(rows)s) AS n
    RETURNING id, created_at
),
p AS (
    INSERT INTO analytics_performancerecord
        (backend_id, decision_id, intent, latency_ms, success, error_type, created_at)
    SELECT %(backend)s, d.id, 'code-review', 100, true, '', d.created_at FROM d
)
INSERT INTO routing_turn (session_id, question, answer, intent, decision_id, created_at)
SELECT %(session)s, 'q', 'a', 'code-review', d.id, d.created_at FROM d
"""


def setup() -> tuple[Any, Any, Any]:
    from backends.models import Backend
    from flywheel.services import tenant_get_or_create_default
    from routing.models import Session

    tenant = tenant_get_or_create_default()
    backend = Backend.objects.create(name="b", kind="flowise", base_url="http://127.0.0.1:9")
    return tenant, backend, Session.objects.create(tenant=tenant)


def fill(tenant: Any, backend: Any, session: Any, rows: int) -> float:
    """40 days of rows, with their partitions (and the days ahead); seconds taken."""
    from django.db import connection
    from django.utils import timezone

    from analytics.retention import PARTITIONED
    from flywheel.partitions import partitions_ensure

    started = time.perf_counter()
    today = timezone.now().date()
    first = today - timedelta(days=DAYS - 1)
    for model in PARTITIONED:
        partitions_ensure(model._meta.db_table, first, today + timedelta(days=3))
    with connection.cursor() as cursor:
        for n in range(DAYS):
            day = first + timedelta(days=n)
            params = {"tenant": tenant.pk, "backend": backend.pk, "session": session.pk}
            cursor.execute(FILL_SQL, {**params, "day": day.isoformat(), "rows": rows})
        cursor.execute("VACUUM ANALYZE")
    return time.perf_counter() - started


class Load(threading.Thread):
    """Writes a decision and reads the newest back, then a backend's recent attempts,
    without pause, timing each round; on a connection of its own."""

    def __init__(self, tenant: Any, backend: Any) -> None:
        super().__init__(daemon=True)
        self.tenant, self.backend = tenant, backend
        self.rounds: list[tuple[float, float]] = []  # (started, seconds)
        self.errors: list[str] = []
        self.stop = threading.Event()

    def run(self) -> None:
        from django.db import connection
        from django.utils import timezone

        from routing.models import RoutingDecision
        from routing.recording.batch_sql import recent_attempts

        try:
            while not self.stop.is_set():
                started = time.perf_counter()
                try:
                    RoutingDecision.objects.create(
                        tenant=self.tenant, question="q", outcome="success", backend=self.backend
                    )
                    list(RoutingDecision.objects.filter(tenant=self.tenant)[:50])
                    since = timezone.now() - timedelta(hours=1)
                    recent_attempts([(self.backend.pk, "code-review")], since, 10)
                except Exception as err:
                    self.errors.append(f"{type(err).__name__}: {err}")
                self.rounds.append((started, time.perf_counter() - started))
        finally:
            connection.close()

    def between(self, start: float, end: float) -> list[float]:
        return [s * 1000 for t, s in self.rounds if start <= t < end]


def _line(name: str, values: list[float]) -> str:
    if not values:
        return f"  {name:<28} none"
    return (
        f"  {name:<28} {len(values):>6}  p50 {percentile(values, 50):7.2f} ms  "
        f"p99 {percentile(values, 99):7.2f} ms  max {max(values):7.2f} ms"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows-per-day", type=int, default=10_000)
    args = parser.parse_args()
    os.environ.update(ENV)
    recreate_database(PG)
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", "--noinput", verbosity=0)
    from django.utils import timezone

    from analytics.retention import retention_apply
    from analytics.rollups import rollups_refresh
    from routing.models import RoutingDecision

    tenant, backend, session = setup()
    filled = fill(tenant, backend, session, args.rows_per_day)
    started = time.perf_counter()
    rollups_refresh()
    rolled = time.perf_counter() - started
    before = RoutingDecision.objects.count()

    import analytics.retention

    drops: list[float] = []  # seconds, a table each
    plain_drop = analytics.retention.partitions_drop

    def timed_drop(table: str, before: object) -> list[str]:
        started = time.perf_counter()
        try:
            return plain_drop(table, before)  # type: ignore[arg-type]
        finally:
            drops.append(time.perf_counter() - started)

    analytics.retention.partitions_drop = timed_drop
    load = Load(tenant, backend)
    load.start()
    time.sleep(3)  # the load alone, to compare with
    drop_start = time.perf_counter()
    done = retention_apply()
    drop_end = time.perf_counter()
    time.sleep(1)
    # The steady state: a day later, one day's partitions go.
    first_drops = len(drops)
    day_start = time.perf_counter()
    next_day = retention_apply(now=timezone.now() + timedelta(days=1))
    day_end = time.perf_counter()
    time.sleep(1)
    load.stop.set()
    load.join()
    after = RoutingDecision.objects.count()

    dropped = done["partitions_dropped"]
    day_drops = drops[first_drops:]
    drops = drops[:first_drops]
    took = drop_end - drop_start
    print(f"Database {PG.rsplit('/', 1)[1]} (recreated); retention {RETENTION_DAYS} days")
    print(
        f"{DAYS} days x {args.rows_per_day:,} decisions (each with a performance record and a "
        f"turn) written in {filled:.1f} s, rolled up in {rolled:.1f} s"
    )
    print(
        f"retention_apply: {took * 1000:.0f} ms in all; {len(dropped)} partitions dropped in "
        f"{sum(drops) * 1000:.0f} ms (a statement a table: "
        f"{', '.join(f'{d * 1000:.0f}' for d in drops)} ms)"
    )
    print(
        f"a day later: {(day_end - day_start) * 1000:.0f} ms in all; "
        f"{len(next_day['partitions_dropped'])} partitions dropped in "
        f"{sum(day_drops) * 1000:.0f} ms"
    )
    print(f"decisions: {before:,} before, {after:,} after both runs")
    print(f"queries (a write, the newest 50, recent attempts), {len(load.rounds)} rounds:")
    print(_line("before the drop (3 s)", load.between(drop_start - 3, drop_start)))
    print(_line("while it ran", load.between(drop_start, drop_end)))
    print(_line("after it", load.between(drop_end, drop_end + 1)))
    print(_line("while a day's drop ran", load.between(day_start, day_end)))
    print(f"  errors: {len(load.errors)}" + (f" (first: {load.errors[0]})" if load.errors else ""))
    # Days whose whole span is past the retention: all but the one the cut falls in.
    if (
        load.errors
        or sum(drops) >= 1.0
        or len(next_day["partitions_dropped"]) != 3
        or len(dropped) != 3 * (DAYS - RETENTION_DAYS - 1)
    ):
        sys.exit(1)


if __name__ == "__main__":
    main()

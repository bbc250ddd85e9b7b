"""Analytics over 1,000,000 routing decisions: the rollup refresh, the reads and the page.

1. Generates, in a few INSERT ... SELECT statements over generate_series (no ORM),
   1,000,000 decisions over the last 30 days (the last day about seven times denser
   than the others) for 3 tenants on 6 backends (3 shared, one of each tenant's own)
   and the 7 shipped intents, ~1.1 performance records per decision (fallbacks try
   two backends, rejections none), and a health probe every 30 s per backend over
   the last 7 days; then VACUUM ANALYZE.
2. Times the first rollup refresh over everything (the worst case: nothing rolled
   up yet), then an incremental one after 2,000 more decisions in the last minute.
3. Adds 2,000 more that stay un-rolled (the tail every read adds from the raw rows)
   and times the analytics reads (analytics.reads): median and p95 over 20 runs
   (fewer, at least 5, for a read that would take more than 10 s in all) and the SQL
   queries each issues.
4. Renders the /analytics/ page (when the URL exists) as a superuser, 20 times with
   ?range=24h and 20 without parameters. The target: <= 300 ms over 1,000,000
   decisions.

`--explain` also prints EXPLAIN (ANALYZE, BUFFERS) of the slowest SELECT of every
read (and page) whose median is over 100 ms, and of the first refresh's.
BENCH_ANALYTICS_DECISIONS=50000 makes a quick try.

Needs PostgreSQL and Redis (as `make test` does); uses a database of its own,
flywheel_bench_analytics_<checkout hash>, recreated on each run.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import (
    manage,
    own_services,
    peak_rss_mb,
    percentile,
    questions,
    recreate_database,
)

PG, ENV = own_services("analytics", DJANGO_ALLOWED_HOSTS="testserver,127.0.0.1,localhost")
os.environ.update(ENV)

import django  # noqa: E402

django.setup()

from django.contrib.auth import get_user_model  # noqa: E402
from django.db import connection  # noqa: E402
from django.db.models import Model  # noqa: E402
from django.test import Client  # noqa: E402
from django.test.utils import CaptureQueriesContext  # noqa: E402
from django.urls import NoReverseMatch, reverse  # noqa: E402
from django.utils import timezone  # noqa: E402

from analytics.models import DecisionRollup, RollupState  # noqa: E402
from analytics.reads import backends_by_intent, timeseries  # noqa: E402
from analytics.rollups import rollups_refresh  # noqa: E402
from backends.models import Backend, BackendHealth, HealthCheck  # noqa: E402
from chatflows.models import Flow  # noqa: E402
from flywheel.models import Tenant  # noqa: E402
from flywheel.services import tenant_get_or_create_default  # noqa: E402
from routing.install import defaults_load  # noqa: E402
from routing.models import IntentPattern, Outcome, PerformanceRecord, RoutingDecision  # noqa: E402

DECISIONS = int(os.environ.get("BENCH_ANALYTICS_DECISIONS", "1000000"))  # fewer: a quick try
TAIL = 2_000  # decisions in the last minute, once rolled up incrementally, once left as tail
RUNS = 20
MIN_RUNS = 5
BUDGET_SECONDS = 10.0
SLOW_MS = 100.0
TARGET_MS = 300.0

INTENTS = (
    "creative-orientation",
    "technical-analysis",
    "document-qa",
    "code-review",
    "summarize",
    "conversation-query",
    "general",
)
INTENT_SHARE = (0.08, 0.20, 0.25, 0.15, 0.12, 0.10, 0.10)
TENANT_SHARE = (0.60, 0.30, 0.10)
OUTCOMES = (Outcome.SUCCESS, Outcome.FALLBACK, Outcome.CACHED, Outcome.FAILED, Outcome.REJECTED)
OUTCOME_SHARE = (0.86, 0.07, 0.02, 0.03, 0.02)
# Each tenant routes among the three shared backends and its own, in these shares; its
# own is the slowest and flakiest (the exponent < 1 pushes its outcomes down the list).
SHARED = (("flowise-main", "flowise"), ("langflow-main", "langflow"), ("flowise-gpu", "flowise"))
POSITION_SHARE = (0.35, 0.30, 0.20, 0.15)
SPEED = (1.0, 1.3, 0.7, 1.8)
FLAKINESS = (1.0, 0.9, 1.0, 0.6)
# total_ms: log-normal, median ~700 ms, clamped to 50 ms .. 10 s.
LATENCY_MU, LATENCY_SIGMA = 6.55, 0.95


def cuts(shares: tuple[float, ...]) -> list[float]:
    """The cumulative bounds width_bucket() picks an index (0-based) by."""
    bounds, total = [], 0.0
    for share in shares[:-1]:
        total += share
        bounds.append(round(total, 6))
    return bounds


# --- The world: tenants, backends, flows --------------------------------------------


class World:
    def __init__(self) -> None:
        defaults_load()
        self.tenants = [
            tenant_get_or_create_default(),
            Tenant.objects.create(name="Globex", slug="globex"),
            Tenant.objects.create(name="Initech", slug="initech"),
        ]
        shared = [
            Backend.objects.create(name=name, kind=kind, base_url=f"http://127.0.0.1:{3000 + i}")
            for i, (name, kind) in enumerate(SHARED)
        ]
        own = [
            Backend.objects.create(
                name=f"{t.slug}-private",
                kind="langflow",
                base_url=f"http://127.0.0.1:{3100 + i}",
                tenant=t,
            )
            for i, t in enumerate(self.tenants)
        ]
        self.backends = shared + own
        generic: dict[int, Flow] = {}
        for b in self.backends:
            BackendHealth.objects.create(backend=b, healthy=True, last_checked_at=timezone.now())
            generic[b.pk] = Flow.objects.create(
                backend=b,
                external_id=f"{b.name}-generic",
                name=f"{b.name} general assistant",
                deployed=True,
                is_generic=True,
                intent_keywords=["general"],
            )
            for i, intent in enumerate(INTENTS[:-1]):
                if (b.pk + i) % 2 == 0:
                    Flow.objects.create(
                        backend=b,
                        external_id=f"{b.name}-{intent}",
                        name=f"{b.name} {intent}",
                        deployed=True,
                        intent_keywords=[intent],
                    )
        # Per tenant, its four backends (the shared ones, then its own), flattened.
        self.slots = [b for t in range(3) for b in (*shared, own[t])]
        self.slot_flows = [generic[b.pk].pk for b in self.slots]

    def params(self) -> dict[str, Any]:
        questions_pool = questions()
        return {
            "tenants": [t.pk for t in self.tenants],
            "tenant_cuts": cuts(TENANT_SHARE),
            "intents": list(INTENTS),
            "intent_cuts": cuts(INTENT_SHARE),
            "outcomes": [str(o) for o in OUTCOMES],
            "outcome_cuts": cuts(OUTCOME_SHARE),
            "position_cuts": cuts(POSITION_SHARE),
            "speed": list(SPEED),
            "flakiness": list(FLAKINESS),
            "slots": [b.pk for b in self.slots],
            "slot_flows": self.slot_flows,
            "questions": questions_pool,
            "nq": len(questions_pool),
            "candidates": [self.candidates(slot) for slot in range(len(self.slots))],
            "evidence": [self.evidence(intent) for intent in INTENTS],
            "chains": [self.chain(str(o)) for o in OUTCOMES],
            "mu": LATENCY_MU,
            "sigma": LATENCY_SIGMA,
        }

    def candidates(self, slot: int) -> str:
        """What a decision of this slot's tenant, won by this slot's backend, records:
        as routing.recording.compact packs them, [backend, flow, score, success,
        margin, typical ms, attempts, expected seconds, generic]."""
        first = slot - slot % 4
        ranked = [slot] + [s for s in range(first, first + 4) if s != slot]
        return json.dumps(
            [
                [
                    self.slots[s].pk,
                    self.slot_flows[s],
                    round(0.9 - 0.1 * i, 3),
                    round(0.95 - 0.02 * i, 3),
                    0.03,
                    round(700 * SPEED[s % 4]),
                    120,
                    2.5,
                    True,
                ]
                for i, s in enumerate(ranked)
            ]
        )

    def evidence(self, intent: str) -> str:
        """The intent's matched rules by id (their summary is said again when read)."""
        rules = IntentPattern.objects.filter(intent__slug=intent).order_by("pk")
        return json.dumps(
            {
                "intent": list(rules.values_list("pk", flat=True)[:2]),
                "query_type": {
                    "reasoning": "Specific entities and a narrow question: a local lookup.",
                    "evidence": {},
                },
            }
        )

    def chain(self, outcome: str) -> str:
        """The fallback chain as packed, [backend, flow, ok, latency ms, error type]."""
        backend, flow = self.slots[0].pk, self.slot_flows[0]
        ok = [backend, flow, True, 640.0]
        failed = [backend, flow, False, 3000.0, "timeout"]
        attempts = {
            "success": [ok],
            "fallback": [failed, ok],
            "cached": [failed],
            "failed": [failed],
            "rejected": [],
        }[outcome]
        return json.dumps(attempts)


# --- Generation ---------------------------------------------------------------------


def columns(model: type[Model], given: dict[str, str]) -> tuple[str, str]:
    """The column list and SELECT list of an INSERT into ``model``'s table: ``given``
    (column -> SQL expression) plus the literal default of any other NOT NULL column
    (so that a field added to the model meanwhile does not break the bench)."""
    exprs = dict(given)
    for field in model._meta.concrete_fields:
        column = field.column
        if column in exprs or field.primary_key or field.null:
            continue
        if not field.has_default():
            raise RuntimeError(f"{model.__name__}.{field.name}: no value and no default")
        default = field.get_default()
        if isinstance(default, dict | list):
            exprs[column] = "'" + json.dumps(default) + "'::jsonb"
        elif isinstance(default, bool):
            exprs[column] = "true" if default else "false"
        elif isinstance(default, int | float):
            exprs[column] = repr(default)
        elif isinstance(default, str) and "'" not in default and "%" not in default:
            exprs[column] = f"'{default}'"
        else:
            raise RuntimeError(f"{model.__name__}.{field.name}: cannot write its default")
    return ", ".join(exprs), ",\n  ".join(exprs.values())


DECISION_EXPRS = {
    "request_id": "gen_random_uuid()",
    "tenant_id": "(%(tenants)s::bigint[])[ti]",
    "question": "(%(questions)s::text[])[1 + mod(g, %(nq)s)]",
    "intent": "(%(intents)s::text[])[ii]",
    "intent_confidence": "round((0.55 + 0.45 * r_misc)::numeric, 3)::float8",
    "intent_method": "CASE WHEN ii = 6 THEN 'context' WHEN r_misc < 0.08 THEN 'llm' "
    "WHEN r_misc > 0.98 THEN 'override' ELSE 'rules' END",
    "query_type": "(ARRAY['LOCAL', 'LOCAL', 'GLOBAL', 'HYBRID'])[1 + mod(g, 4)]",
    "query_type_confidence": "round((0.5 + 0.5 * r_backend)::numeric, 3)::float8",
    "evidence": "(%(evidence)s::json[])[ii]",
    "routing_method": "CASE WHEN r_misc > 0.97 THEN 'explicit' ELSE 'auto' END",
    "backend_id": "CASE WHEN oi <= 2 THEN (%(slots)s::bigint[])[slot] END",
    "flow_id": "CASE WHEN oi <= 2 THEN (%(slot_flows)s::bigint[])[slot] END",
    "score": "CASE WHEN oi <= 2 THEN round((0.45 + 0.5 * r_misc)::numeric, 4)::float8 END",
    "candidates": "CASE WHEN oi = 5 THEN '[]'::json ELSE (%(candidates)s::json[])[slot] END",
    "fallback_chain": "(%(chains)s::json[])[oi]",
    "outcome": "(%(outcomes)s::text[])[oi]",
    "error_type": "CASE oi WHEN 4 THEN 'timeout' WHEN 5 THEN 'validation' ELSE '' END",
    "classify_ms": "0.3 + 2 * r_misc",
    "route_ms": "0.1 + 0.5 * r_backend",
    "execute_ms": "greatest(0, total - 0.4 - 2 * r_misc - 0.5 * r_backend)",
    "total_ms": "total",
    "created_at": "created_at",
}

# The innermost SELECT draws the random numbers (a subquery, not a CTE: no
# materialisation); the next ones pick tenant, intent, backend slot and outcome. No
# ORDER BY: the rows stream out in generate_series' order, so ids follow created_at
# (the attempts likewise follow their decisions) without a sort of a million rows.
DECISIONS_FROM = """
FROM (
  SELECT g, ti, ii, r_misc, r_backend, created_at,
    (ti - 1) * 4 + pos AS slot,
    1 + width_bucket(r_outcome ^ (%(flakiness)s::float8[])[pos], %(outcome_cuts)s::float8[])
      AS oi,
    least(10000, greatest(50,
      exp(%(mu)s + %(sigma)s * z) * (%(speed)s::float8[])[pos])) AS total
  FROM (
    SELECT g, r_misc, r_backend, r_outcome,
      1 + width_bucket(r_tenant, %(tenant_cuts)s::float8[]) AS ti,
      1 + width_bucket(r_intent, %(intent_cuts)s::float8[]) AS ii,
      1 + width_bucket(r_backend, %(position_cuts)s::float8[]) AS pos,
      sqrt(-2 * ln(1 - r_z1)) * cos(2 * pi() * r_z2) AS z,
      CASE WHEN u < 1 - %(dense)s
        THEN %(t0)s::timestamptz
          + (%(t1)s::timestamptz - %(t0)s::timestamptz) * (u / nullif(1 - %(dense)s, 0))
        ELSE %(t1)s::timestamptz
          + (%(t2)s::timestamptz - %(t1)s::timestamptz) * ((u - (1 - %(dense)s)) / %(dense)s)
      END AS created_at
    FROM (
      SELECT g, (g - 1)::float8 / %(n)s AS u,
        random() AS r_tenant, random() AS r_intent, random() AS r_backend,
        random() AS r_outcome, random() AS r_z1, random() AS r_z2, random() AS r_misc
      FROM generate_series(1, %(n)s) AS g
    ) AS drawn
  ) AS picked
) AS shaped
"""

ATTEMPT_EXPRS = {
    # The winner (a success's only attempt, a fallback's second) is the decision's
    # backend; the failed attempts go to the tenant's next backends.
    "backend_id": "CASE WHEN won THEN backend_id "
    "ELSE (%(slots)s::bigint[])[first_slot + mod(pos - 1 + k, 4)] END",
    "flow_id": "CASE WHEN won THEN flow_id "
    "ELSE (%(slot_flows)s::bigint[])[first_slot + mod(pos - 1 + k, 4)] END",
    "decision_id": "id",
    "intent": "intent",
    "latency_ms": "CASE WHEN won THEN execute_ms * (CASE WHEN n = 2 THEN 0.55 ELSE 1 END) "
    "WHEN n = 2 AND outcome = 'fallback' THEN execute_ms * 0.45 "
    "ELSE execute_ms / n END",
    "success": "won",
    "error_type": "CASE WHEN won THEN '' "
    "ELSE (ARRAY['timeout', 'http_502', 'connect'])[1 + mod(id + k, 3)] END",
    "created_at": "created_at",
}

ATTEMPTS_FROM = """
FROM (
  SELECT d.*, a.k,
    d.outcome IN ('success', 'fallback') AND a.k = d.n AS won
  FROM (
    SELECT id, backend_id, flow_id, intent, outcome, execute_ms, created_at,
      (ti - 1) * 4 + 1 AS first_slot,
      coalesce(
        array_position((%(slots)s::bigint[])[(ti - 1) * 4 + 1 : (ti - 1) * 4 + 4], backend_id),
        1 + mod(id, 4)::int
      ) AS pos,
      CASE outcome WHEN 'success' THEN 1 WHEN 'fallback' THEN 2 WHEN 'rejected' THEN 0
        ELSE 1 + mod(id, 2)::int END AS n
    FROM (
      SELECT *, array_position(%(tenants)s::bigint[], tenant_id) AS ti
      FROM {decisions}
      WHERE id > %(after)s
    ) AS raw
  ) AS d
  CROSS JOIN LATERAL generate_series(1, d.n) AS a(k)
) AS attempts
"""

HEALTH_SQL = """
INSERT INTO {table} ({columns})
SELECT {exprs}
FROM (
  SELECT b, t, random() AS r, random() AS r_z1, random() AS r_z2
  FROM unnest(%(backends)s::bigint[]) AS b,
    generate_series(%(since)s::timestamptz, %(until)s::timestamptz, interval '30 seconds') AS t
) AS probes
ORDER BY t, b
"""
HEALTH_EXPRS = {
    "backend_id": "b",
    "checked_at": "t",
    "ok": "r > 0.02",
    "latency_ms": "CASE WHEN r > 0.02 THEN "
    "exp(4.2 + 0.6 * sqrt(-2 * ln(1 - r_z1)) * cos(2 * pi() * r_z2)) END",
    "error": "CASE WHEN r > 0.02 THEN '' ELSE 'timed out after 5 s' END",
}


def execute(sql: str, params: dict[str, Any]) -> int:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.rowcount


def insert_decisions(
    world: dict[str, Any], n: int, t0: datetime, t1: datetime, t2: datetime, dense: float
) -> tuple[int, float, int, float]:
    """``n`` decisions, in time order: a share 1 - ``dense`` from t0 to t1, the rest from
    t1 to t2; then their attempts. Returns the decisions and attempts written, each with
    the seconds it took."""
    decisions_table = RoutingDecision._meta.db_table
    after = RoutingDecision.objects.order_by("-pk").values_list("pk", flat=True).first() or 0
    cols, exprs = columns(RoutingDecision, DECISION_EXPRS)
    params = {**world, "n": n, "t0": t0, "t1": t1, "t2": t2, "dense": dense, "after": after}
    started = time.perf_counter()
    written = execute(
        f"INSERT INTO {decisions_table} ({cols})\nSELECT\n  {exprs}\n{DECISIONS_FROM}",
        params,
    )
    middle = time.perf_counter()
    cols, exprs = columns(PerformanceRecord, ATTEMPT_EXPRS)
    attempts_from = ATTEMPTS_FROM.format(decisions=decisions_table)
    attempts = execute(
        f"INSERT INTO {PerformanceRecord._meta.db_table} ({cols})\n"
        f"SELECT\n  {exprs}\n{attempts_from}",
        params,
    )
    return written, middle - started, attempts, time.perf_counter() - middle


def insert_health_checks(backends: list[Backend], since: datetime, until: datetime) -> int:
    cols, exprs = columns(HealthCheck, HEALTH_EXPRS)
    sql = HEALTH_SQL.format(table=HealthCheck._meta.db_table, columns=cols, exprs=exprs)
    return execute(sql, {"backends": [b.pk for b in backends], "since": since, "until": until})


def generate(world: World) -> dict[str, Any]:
    params = world.params()
    now = timezone.now()
    with connection.cursor() as cursor:
        cursor.execute("SELECT setseed(0.42)")
        # Our own database, filled consistently by construction: no per-row FK triggers.
        cursor.execute("SET session_replication_role = replica")
    try:
        started = time.perf_counter()
        decisions, decisions_s, attempts, attempts_s = insert_decisions(
            params,
            DECISIONS,
            now - timedelta(days=30),
            now - timedelta(days=1),
            now - timedelta(minutes=2),
            0.2,
        )
        inserted = time.perf_counter()
        checks = insert_health_checks(world.backends, now - timedelta(days=7), now)
        checked = time.perf_counter()
    finally:
        with connection.cursor() as cursor:
            cursor.execute("SET session_replication_role = DEFAULT")
    with connection.cursor() as cursor:
        for model in (RoutingDecision, PerformanceRecord, HealthCheck):
            cursor.execute(f"VACUUM ANALYZE {model._meta.db_table}")
    done = time.perf_counter()
    print("Generation:")
    print(f"  {decisions:,} decisions (one INSERT ... SELECT): {decisions_s:.1f} s")
    print(
        f"  {attempts:,} performance records ({attempts / decisions:.2f} per decision): "
        f"{attempts_s:.1f} s"
    )
    print(
        f"  {checks:,} health checks (every 30 s per backend, 7 days): {checked - inserted:.1f} s"
    )
    print(f"  VACUUM ANALYZE: {done - checked:.1f} s")
    print(f"  generation in all: {done - started:.1f} s")
    print(f"  sizes: {table_sizes()}")
    print(f"  decisions per outcome: {per_outcome()}")
    return params


def table_sizes() -> str:
    with connection.cursor() as cursor:
        sizes = []
        for model in (RoutingDecision, PerformanceRecord, HealthCheck, DecisionRollup):
            table = model._meta.db_table
            cursor.execute(
                "SELECT pg_size_pretty(pg_table_size(%s)), pg_size_pretty(pg_indexes_size(%s))",
                [table, table],
            )
            heap, indexes = cursor.fetchone()
            sizes.append(f"{table} {heap} (+ {indexes} indexes)")
    return "; ".join(sizes)


def per_outcome() -> str:
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT outcome, count(*) FROM {RoutingDecision._meta.db_table} "  # noqa: S608
            "GROUP BY outcome ORDER BY count(*) DESC"
        )
        rows = cursor.fetchall()
    total = sum(n for _, n in rows)
    return ", ".join(f"{outcome} {n / total:.1%}" for outcome, n in rows)


# --- Measuring ----------------------------------------------------------------------


class Measured:
    def __init__(self, label: str) -> None:
        self.label = label
        self.ms: list[float] = []
        self.sql_ms: list[float] = []  # per run, the time spent waiting on PostgreSQL
        self.queries: set[int] = set()
        self.slowest: tuple[float, str] = (0.0, "")

    def line(self) -> str:
        queries = "/".join(str(q) for q in sorted(self.queries))
        slowest = self.slowest[0] * 1000
        return (
            f"  {self.label + ':':<58} median {statistics.median(self.ms):8.1f} ms  "
            f"p95 {percentile(self.ms, 95):8.1f} ms  queries {queries:>3}  "
            f"(in SQL {statistics.median(self.sql_ms):.0f} ms, slowest query {slowest:.0f} ms; "
            f"n={len(self.ms)})"
        )


def measure(label: str, fn: Callable[[], Any], runs: int = RUNS) -> Measured:
    """``runs`` timed calls of ``fn`` after one to warm up; fewer (at least MIN_RUNS)
    when they take more than BUDGET_SECONDS in all, so a slow read cannot stall the run."""
    fn()  # warm: imports, the routing state memo, PostgreSQL's buffers
    result = Measured(label)
    budget = time.perf_counter() + BUDGET_SECONDS
    while len(result.ms) < runs and (len(result.ms) < MIN_RUNS or time.perf_counter() < budget):
        with CaptureQueriesContext(connection) as captured:
            started = time.perf_counter()
            fn()
            result.ms.append((time.perf_counter() - started) * 1000)
        result.queries.add(len(captured.captured_queries))
        result.sql_ms.append(sum(float(q["time"]) for q in captured.captured_queries) * 1000)
        for query in captured.captured_queries:
            seconds = float(query["time"])
            if seconds > result.slowest[0]:
                result.slowest = (seconds, query["sql"])
    print(result.line(), flush=True)
    return result


def explain(label: str, sql: str) -> None:
    """EXPLAIN ANALYZE (it runs the query again) of a SELECT: never of a write."""
    if not sql.lstrip().upper().startswith("SELECT"):
        return
    print(f"  EXPLAIN (ANALYZE, BUFFERS) of the slowest query of {label}:")
    print("    " + sql[:600].replace("\n", " ") + (" ..." if len(sql) > 600 else ""))
    with connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN (ANALYZE, BUFFERS) {sql}")
        for (line,) in cursor.fetchall():
            print(f"    {line}")


def refresh(label: str, *, explain_slow: bool = False) -> None:
    with CaptureQueriesContext(connection) as captured:
        started = time.perf_counter()
        did = rollups_refresh()
        elapsed = time.perf_counter() - started
    queries = captured.captured_queries
    in_sql = sum(float(q["time"]) for q in queries)
    print(f"  {label}: {elapsed:.2f} s; {did}")
    print(
        f"    {len(queries)} queries, {in_sql:.2f} s waiting on PostgreSQL, "
        f"{elapsed - in_sql:.2f} s in Python; the slowest:"
    )
    slowest = sorted(queries, key=lambda q: -float(q["time"]))[:4]
    for query in slowest:
        print(f"    {float(query['time']) * 1000:9.1f} ms  {summarised(query['sql'])}")
    selects = [q for q in slowest if q["sql"].startswith("SELECT")]
    if explain_slow and selects and float(selects[0]["time"]) * 1000 > SLOW_MS:
        explain(label, selects[0]["sql"])


def summarised(sql: str) -> str:
    """A long statement told apart by its head and its FROM / WHERE."""
    if len(sql) <= 150:
        return sql
    at = sql.find(" FROM ")
    return sql[:70] + " ..." + (sql[at : at + 150] + " ..." if at > 0 else "")


def rollup_rows() -> str:
    counts = {g: DecisionRollup.objects.filter(granularity=g).count() for g in ("minute", "hour")}
    return f"{counts['minute']:,} minute rows, {counts['hour']:,} hour rows"


def reads(tenant: Tenant, *, explain_slow: bool) -> list[Measured]:
    now = timezone.now()
    day, week, month = (now - timedelta(days=d) for d in (1, 7, 30))
    state = RollupState.objects.get(pk=1)
    tail = RoutingDecision.objects.filter(pk__gt=state.last_decision_id).count()
    print(
        f"Analytics reads ({RUNS} runs each, fewer past {BUDGET_SECONDS:.0f} s; "
        f"{tail:,} decisions not rolled up yet):"
    )
    results = [
        measure(
            "backends_by_intent, every tenant, last 24 h",
            lambda: backends_by_intent(tenant=None, since=day),
        ),
        measure(
            f"backends_by_intent, tenant {tenant.slug}, last 24 h",
            lambda: backends_by_intent(tenant=tenant, since=day),
        ),
        measure(
            "backends_by_intent, every tenant, last 7 days",
            lambda: backends_by_intent(tenant=None, since=week),
        ),
        measure(
            "backends_by_intent, every tenant, last 30 days",
            lambda: backends_by_intent(tenant=None, since=month),
        ),
        measure(
            f"backends_by_intent, tenant {tenant.slug}, last 30 days",
            lambda: backends_by_intent(tenant=tenant, since=month),
        ),
        measure(
            "timeseries, every tenant, last 6 h (minute buckets)",
            lambda: timeseries(tenant=None, since=now - timedelta(hours=6)),
        ),
        measure("timeseries, every tenant, last 24 h", lambda: timeseries(tenant=None, since=day)),
        measure(
            "timeseries, every tenant, last 7 days", lambda: timeseries(tenant=None, since=week)
        ),
    ]
    if explain_slow:
        for measured in results:
            if statistics.median(measured.ms) > SLOW_MS:
                explain(measured.label, measured.slowest[1])
    return results


def page(*, explain_slow: bool) -> None:
    try:
        url = reverse("analytics")
    except NoReverseMatch:
        print("The /analytics/ page: not there yet (no URL named 'analytics'); skipped.")
        return
    user = get_user_model().objects.create_superuser(
        username="bench-staff", email="staff@example.com", password=None
    )
    client = Client()
    client.force_login(user)
    print(
        f"The page {url} as a superuser ({RUNS} renders each, fewer past "
        f"{BUDGET_SECONDS:.0f} s; target <= {TARGET_MS:.0f} ms):"
    )
    results = []
    for label, query in (("?range=24h", {"range": "24h"}), ("no parameters", {})):
        try:
            response = client.get(url, query)
        except Exception as err:  # the page is being built: say so, and go on
            print(f"  GET {url} {label}: raised {type(err).__name__}: {err}; skipped")
            continue
        if response.status_code != 200:
            print(f"  GET {url} {label}: HTTP {response.status_code}; skipped")
            continue
        size = len(response.content)

        def render(query: dict[str, str] = query) -> None:
            client.get(url, query)

        measured = measure(f"GET {url} {label} ({size:,} bytes)", render)
        verdict = "within" if percentile(measured.ms, 95) <= TARGET_MS else "OVER"
        print(f"    p95 {verdict} the {TARGET_MS:.0f} ms target")
        results.append(measured)
    if explain_slow:
        for measured in results:
            if statistics.median(measured.ms) > SLOW_MS:
                explain(measured.label, measured.slowest[1])


def main() -> None:
    explain_slow = "--explain" in sys.argv[1:]
    wall = time.perf_counter()
    db_name = PG.rsplit("/", 1)[1]
    print(f"Database {db_name} (recreated), {DECISIONS:,} decisions")
    recreate_database(PG)
    manage(ENV, "migrate", "--noinput", "-v", "0")
    world = World()
    params = generate(world)

    print("Rollup refresh:")
    refresh(
        "first refresh, every decision (last_decision_id 0: the worst case)",
        explain_slow=explain_slow,
    )
    print(f"    rollup rows: {rollup_rows()}")
    print(f"    this process's peak memory so far (VmHWM): {peak_rss_mb(os.getpid()):.0f} MB")
    now = timezone.now()
    minute_ago = now - timedelta(minutes=1)
    insert_decisions(params, TAIL, minute_ago, minute_ago, now, 1.0)
    refresh(f"incremental refresh after {TAIL:,} decisions in the last minute")
    # The tail the reads add from the raw rows: written after the last refresh.
    now = timezone.now()
    insert_decisions(params, TAIL, now - timedelta(minutes=1), now - timedelta(minutes=1), now, 1.0)
    with connection.cursor() as cursor:  # as autovacuum soon would, after so many rows
        for model in (RoutingDecision, PerformanceRecord, DecisionRollup):
            cursor.execute(f"ANALYZE {model._meta.db_table}")

    reads(world.tenants[0], explain_slow=explain_slow)
    page(explain_slow=explain_slow)
    print(f"Wall time: {time.perf_counter() - wall:.1f} s")


if __name__ == "__main__":
    main()

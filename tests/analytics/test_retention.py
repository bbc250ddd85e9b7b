"""Retention: day partitions made ahead and dropped on time, rollups kept, expired
traces told apart from unknown ones (analytics/retention.py, flywheel/partitions.py)."""

from __future__ import annotations

import importlib
from datetime import UTC, datetime, timedelta
from io import StringIO
from time import monotonic

import pytest
from django.apps import apps
from django.conf import settings
from django.contrib.auth.models import User
from django.core.management import call_command
from django.db import IntegrityError, OperationalError, connection
from django.test import Client
from django.utils import timezone
from django_celery_beat.models import PeriodicTask
from rest_framework.test import APIClient

from analytics.models import DecisionRollup
from analytics.retention import PACK_LOCK, retention_apply, retention_pack
from analytics.rollups import rollups_refresh
from analytics.tasks import pack_indexes
from backends.models import Backend
from flywheel import ids
from flywheel.models import Tenant
from flywheel.partitions import (
    day_partition,
    partition_indexes,
    partitions,
    partitions_ensure,
    partitions_pack,
)
from routing.models import PerformanceRecord, RoutingDecision, Session, Turn

pytestmark = pytest.mark.django_db

NOW = timezone.now()
OLD = NOW - timedelta(days=settings.RETENTION_DAYS + 5)  # past the retention
RECENT = NOW - timedelta(days=2)
DECISIONS = RoutingDecision._meta.db_table


def decide(tenant: Tenant, backend: Backend, at: datetime, *, session: Session | None = None):
    """A decision made ``at``, with a performance record (and a turn, in a session)."""
    decision = RoutingDecision.objects.create(
        tenant=tenant,
        request_id=ids.uuid7(at.timestamp()),
        question="Please review my pull request",
        intent="code-review",
        outcome="success",
        backend=backend,
        session=session,
        total_ms=120,
        created_at=at,
    )
    PerformanceRecord.objects.create(
        backend=backend,
        decision=decision,
        intent="code-review",
        latency_ms=120,
        success=True,
        created_at=at,
    )
    if session is not None:
        turn = Turn.objects.create(session=session, question="q", answer="a", decision=decision)
        Turn.objects.filter(pk=turn.pk).update(created_at=at)
    return decision


def _holds(partition: str, decision: RoutingDecision) -> bool:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT count(*) FROM {partition} WHERE id = %s", [decision.pk])  # noqa: S608
        return cursor.fetchone()[0] == 1


def _days(table: str) -> set:
    return {p.day for p in partitions(table) if p.day is not None}


def test_beat_makes_the_coming_days_partitions_for_each_table() -> None:
    done = retention_apply(now=NOW)

    coming = {NOW.date() + timedelta(days=n) for n in range(settings.PARTITIONS_AHEAD_DAYS + 1)}
    for table in (DECISIONS, PerformanceRecord._meta.db_table, Turn._meta.db_table):
        assert coming <= _days(table)
    assert retention_apply(now=NOW)["partitions_made"] == []  # made once
    assert done["kept_since"] == NOW - timedelta(days=settings.RETENTION_DAYS)


def test_a_day_past_the_retention_is_dropped_and_its_rollups_stay(
    tenant: Tenant, backend: Backend
) -> None:
    partitions_ensure(DECISIONS, OLD.date(), OLD.date())
    partitions_ensure(PerformanceRecord._meta.db_table, OLD.date(), OLD.date())
    old, recent = decide(tenant, backend, OLD), decide(tenant, backend, RECENT)
    rollups_refresh(now=NOW)
    hour = OLD.replace(minute=0, second=0, microsecond=0)
    assert DecisionRollup.objects.filter(granularity="hour", bucket_start=hour).exists()

    done = retention_apply(now=NOW)

    assert day_partition(DECISIONS, OLD.date()) in done["partitions_dropped"]
    assert OLD.date() not in _days(DECISIONS)
    assert not RoutingDecision.objects.filter(pk=old.pk).exists()
    assert not PerformanceRecord.objects.filter(decision_id=old.pk).exists()
    assert RoutingDecision.objects.filter(pk=recent.pk).exists()
    rolled = DecisionRollup.objects.filter(granularity="hour", bucket_start=hour, backend=None)
    assert [r.count for r in rolled] == [1]
    rollups_refresh(now=NOW)  # its raw rows gone, the hour is not recomputed to nothing
    assert [r.count for r in rolled.all()] == [1]


def test_what_the_rollups_have_not_read_is_not_dropped(tenant: Tenant, backend: Backend) -> None:
    partitions_ensure(DECISIONS, OLD.date(), OLD.date())
    old = decide(tenant, backend, OLD)

    retention_apply(now=NOW)
    assert RoutingDecision.objects.filter(pk=old.pk).exists()

    rollups_refresh(now=NOW)
    retention_apply(now=NOW)
    assert not RoutingDecision.objects.filter(pk=old.pk).exists()


def test_rows_in_the_default_partition_are_deleted_past_the_retention(
    tenant: Tenant, backend: Backend
) -> None:
    # No partition for that day: the row lands in the default one.
    old = decide(tenant, backend, OLD - timedelta(days=400))
    assert _holds(f"{DECISIONS}_default", old)
    rollups_refresh(now=NOW)

    done = retention_apply(now=NOW)

    assert done["rows_deleted"][DECISIONS] == 1
    assert not RoutingDecision.objects.filter(pk=old.pk).exists()


def test_a_day_made_late_takes_its_rows_from_the_default_partition(
    tenant: Tenant, backend: Backend
) -> None:
    day = NOW.date() + timedelta(days=30)  # beyond what is made ahead
    at = datetime.combine(day, datetime.min.time(), UTC) + timedelta(hours=5)
    decision = decide(tenant, backend, at)

    partitions_ensure(DECISIONS, day, day)

    assert _holds(day_partition(DECISIONS, day), decision)
    assert not _holds(f"{DECISIONS}_default", decision)
    assert RoutingDecision.objects.filter(pk=decision.pk).exists()


def test_sessions_idle_past_the_retention_go_with_their_turns(
    tenant: Tenant, backend: Backend
) -> None:
    partitions_ensure(Turn._meta.db_table, OLD.date(), OLD.date())
    idle, active = Session.objects.create(tenant=tenant), Session.objects.create(tenant=tenant)
    decide(tenant, backend, OLD, session=idle)
    decide(tenant, backend, RECENT, session=active)
    Session.objects.filter(pk=idle.pk).update(updated_at=OLD)
    rollups_refresh(now=NOW)

    done = retention_apply(now=NOW)

    assert done["sessions_deleted"] == 1
    assert list(Session.objects.values_list("pk", flat=True)) == [active.pk]
    assert list(Turn.objects.values_list("session_id", flat=True)) == [active.pk]


def test_the_trace_of_an_expired_decision_says_so(tenant: Tenant, backend: Backend) -> None:
    partitions_ensure(DECISIONS, OLD.date(), OLD.date())
    old = decide(tenant, backend, OLD)
    rollups_refresh(now=NOW)
    retention_apply(now=NOW)
    client = Client()
    client.force_login(User.objects.create_superuser("admin", password="x"))

    gone = client.get(f"/decisions/{old.request_id}")
    unknown = client.get(f"/decisions/{ids.uuid4()}")

    assert gone.status_code == 410
    assert "has expired" in gone.content.decode()
    assert f"{OLD:%Y-%m-%d}" in gone.content.decode()
    assert unknown.status_code == 404


def test_the_api_answers_410_in_the_error_shape_for_an_expired_decision(
    api_client: APIClient,
) -> None:
    request_id = ids.uuid7(OLD.timestamp())

    response = api_client.get(f"/api/v1/decisions/{request_id}")

    assert response.status_code == 410
    error = response.json()["error"]
    assert error["type"] == "ExpiredError"
    assert error["details"]["request_id"] == str(request_id)


def _write_a_day(backend: Backend, day) -> str:
    """Performance records of ``day`` as they are written (each intent's newest at the
    end of its range, in the middle of the index); returns the name of that index.
    The day's indexes are not packed (an earlier test may have packed them)."""
    table = PerformanceRecord._meta.db_table
    with connection.cursor() as cursor:
        for name, _, _ in partition_indexes(cursor, day_partition(table, day)):
            cursor.execute(f"COMMENT ON INDEX {name} IS NULL")
    start = datetime.combine(day, datetime.min.time(), UTC)
    intents = ["general", "code-review", "technical-analysis", "summarize", "creative-orientation"]
    PerformanceRecord.objects.bulk_create(
        PerformanceRecord(
            backend=backend,
            intent=intents[n % len(intents)],
            latency_ms=10,
            success=True,
            created_at=start + timedelta(seconds=n),
        )
        for n in range(6000)
    )
    with connection.cursor() as cursor:  # named by PostgreSQL, its table's name cut short
        cursor.execute(
            "SELECT indexname FROM pg_indexes WHERE tablename = %s AND indexdef LIKE %s",
            [day_partition(table, day), "%(backend_id, intent, created_at)%"],
        )
        return cursor.fetchone()[0]


def _size(index: str) -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_relation_size(to_regclass(%s))", [index])
        return int(cursor.fetchone()[0])


def _indexes(partition: str) -> dict[str, tuple[bool, bool]]:
    with connection.cursor() as cursor:
        return {
            name: (valid, packed) for name, valid, packed in partition_indexes(cursor, partition)
        }


@pytest.mark.django_db(transaction=True)
def test_a_day_that_has_passed_has_its_indexes_packed_once(backend: Backend) -> None:
    table = PerformanceRecord._meta.db_table
    day = RECENT.date()
    partitions_ensure(table, day, NOW.date())
    recent = _write_a_day(backend, day)
    written = _size(recent)

    done = retention_pack(now=NOW)

    assert recent in done["indexes_packed"]
    assert f"{day_partition(table, day)}_pkey" in done["indexes_packed"]
    assert not [name for name in done["indexes_packed"] if f"{NOW:%Y%m%d}" in name]  # today's
    assert _size(recent) < 0.7 * written  # it was mostly half-full pages
    assert retention_pack(now=NOW)["indexes_packed"] == []  # packed once
    newest = PerformanceRecord.objects.filter(backend=backend, intent="summarize")
    start = datetime.combine(day, datetime.min.time(), UTC)
    assert newest.order_by("-created_at")[0].created_at == start + timedelta(seconds=5998)


@pytest.mark.django_db(transaction=True)
def test_a_rebuild_cut_short_is_done_again_and_its_leftovers_dropped(backend: Backend) -> None:
    """A rebuild stopped half-way (its storage parameter set, the worker gone) is not
    taken for done; the invalid copies a REINDEX CONCURRENTLY left are dropped."""
    table = PerformanceRecord._meta.db_table
    day = RECENT.date()
    partition = day_partition(table, day)
    partitions_ensure(table, day, NOW.date())
    recent = _write_a_day(backend, day)
    leftovers = {"perf_recent_ccnew", "perf_recent_ccold1"}
    with connection.cursor() as cursor:
        # What a rebuild cut short leaves: the parameter set, an invalid copy (here
        # made by a unique index that fails on the duplicate intents).
        cursor.execute(f"ALTER INDEX {recent} SET (fillfactor = 100)")
        for leftover in leftovers:
            with pytest.raises(IntegrityError):
                cursor.execute(
                    f"CREATE UNIQUE INDEX CONCURRENTLY {leftover} ON {partition} (intent)"
                )
    assert {name: _indexes(partition)[name] for name in leftovers} == dict.fromkeys(
        leftovers, (False, False)
    )

    done = retention_pack(now=NOW)

    assert recent in done["indexes_packed"]
    assert not leftovers & set(_indexes(partition))
    assert all(valid and packed for valid, packed in _indexes(partition).values())


@pytest.mark.django_db(transaction=True)
def test_packing_starts_nothing_once_its_time_is_up_and_the_newest_day_goes_first(
    backend: Backend,
) -> None:
    table = PerformanceRecord._meta.db_table
    before = RECENT.date() - timedelta(days=1)
    partitions_ensure(table, before, NOW.date())
    for day in (before, RECENT.date()):
        _write_a_day(backend, day)

    assert retention_pack(now=NOW, seconds=0)["indexes_packed"] == []
    done = retention_pack(now=NOW)

    with connection.cursor() as cursor:  # the day of each index packed, in order
        days = []
        for name in done["indexes_packed"]:
            cursor.execute(
                "SELECT indrelid::regclass::text FROM pg_index WHERE indexrelid = to_regclass(%s)",
                [name],
            )
            days.append(cursor.fetchone()[0].rsplit("_p", 1)[1])
    assert {f"{before:%Y%m%d}", f"{RECENT:%Y%m%d}"} <= set(days)
    assert days == sorted(days, reverse=True)


@pytest.mark.django_db(transaction=True)
def test_a_rebuild_still_going_when_the_time_is_up_is_cancelled_cleanly(
    backend: Backend,
) -> None:
    """PostgreSQL cancels it (statement_timeout): the connection is not left in the
    middle of a statement, as a Celery time limit would leave it."""
    table = PerformanceRecord._meta.db_table
    day = RECENT.date()
    partition = day_partition(table, day)
    partitions_ensure(table, day, NOW.date())
    _write_a_day(backend, day)
    other = connection.copy()
    try:
        with other.cursor() as cursor:  # a maintenance lock the rebuild waits for
            cursor.execute("BEGIN")
            cursor.execute(f"LOCK TABLE {partition} IN SHARE UPDATE EXCLUSIVE MODE")
        with pytest.raises(OperationalError, match="statement timeout"):
            partitions_pack(table, day, NOW.date(), until=monotonic() + 1.5)
    finally:
        other.close()

    assert not any(packed for _, packed in _indexes(partition).values())
    assert PerformanceRecord.objects.count() == 6000  # the connection still serves
    with connection.cursor() as cursor:
        cursor.execute("SHOW statement_timeout")
        assert cursor.fetchone()[0] == "0"
    assert retention_pack(now=NOW)["indexes_packed"]
    assert all(valid and packed for valid, packed in _indexes(partition).values())


@pytest.mark.django_db(transaction=True)
def test_a_day_the_retention_drops_within_a_day_is_not_packed(backend: Backend) -> None:
    table = PerformanceRecord._meta.db_table
    last = (NOW - timedelta(days=settings.RETENTION_DAYS)).date()
    partitions_ensure(table, last, last)
    _write_a_day(backend, last)

    done = retention_pack(now=NOW)

    assert not [name for name in done["indexes_packed"] if f"{last:%Y%m%d}" in name]
    assert not any(packed for _, packed in _indexes(day_partition(table, last)).values())


@pytest.mark.django_db(transaction=True)
def test_one_packing_run_at_a_time(backend: Backend) -> None:
    table = PerformanceRecord._meta.db_table
    partitions_ensure(table, RECENT.date(), NOW.date())
    _write_a_day(backend, RECENT.date())
    other = connection.copy()
    try:
        with other.cursor() as cursor:  # a run in another process
            cursor.execute("SELECT pg_advisory_lock(%s)", [PACK_LOCK])

        assert retention_pack(now=NOW) == {"indexes_packed": [], "busy": True}
    finally:
        with other.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_unlock(%s)", [PACK_LOCK])
        other.close()
    assert retention_pack(now=NOW)["indexes_packed"]


def test_the_packing_schedule_is_added_where_the_defaults_were_installed() -> None:
    migration = importlib.import_module("analytics.migrations.0011_schedule_packing")
    call_command("load_defaults", stdout=StringIO())
    PeriodicTask.objects.filter(task="analytics.pack_indexes").delete()

    migration.forwards(apps, None)

    task = PeriodicTask.objects.get(task="analytics.pack_indexes")
    assert (task.name, task.interval.every) == ("Pack the indexes of passed days", 3600)
    migration.backwards(apps, None)
    assert not PeriodicTask.objects.filter(task="analytics.pack_indexes").exists()


def test_the_packing_task_ends_itself_before_celery_would_stop_it() -> None:
    """Its limits stand past FLYWHEEL_PACK_SECONDS, where PostgreSQL cancels a rebuild:
    an interrupted statement would leave the worker's connection busy."""
    soft, hard = pack_indexes.soft_time_limit, pack_indexes.time_limit
    assert soft is not None
    assert hard is not None
    assert settings.PACK_SECONDS < soft < hard
    assert settings.CELERY_TASK_SOFT_TIME_LIMIT < settings.PACK_SECONDS

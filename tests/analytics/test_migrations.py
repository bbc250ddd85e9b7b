"""analytics 0006 schedules the rollups where the default schedules were installed."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django_celery_beat.models import IntervalSchedule, PeriodicTask

pytestmark = pytest.mark.django_db(transaction=True)  # migrations run outside a test's transaction

BEFORE = [("analytics", "0005_rollup_buckets")]
AFTER = [("analytics", "0006_schedule_rollups")]


def _migrate(targets: list[tuple[str, str]]) -> None:
    MigrationExecutor(connection).migrate(targets)


@pytest.fixture
def before_the_schedule() -> Iterator[None]:
    leaves = MigrationExecutor(connection).loader.graph.leaf_nodes()
    _migrate(leaves)
    _migrate(BEFORE)
    yield
    _migrate(leaves)


def test_it_adds_the_rollup_task_beside_installed_schedules(before_the_schedule) -> None:
    every_30s, _ = IntervalSchedule.objects.get_or_create(every=30, period="seconds")
    PeriodicTask.objects.create(
        name="Check backend health", task="backends.check_health", interval=every_30s
    )

    _migrate(AFTER)

    task = PeriodicTask.objects.get(task="analytics.rollup_decisions")
    assert (task.name, task.interval.every, task.enabled) == ("Roll up decisions", 60, True)
    _migrate(BEFORE)
    assert not PeriodicTask.objects.filter(task="analytics.rollup_decisions").exists()


def test_it_leaves_a_database_without_schedules_to_load_defaults(before_the_schedule) -> None:
    _migrate(AFTER)

    assert not PeriodicTask.objects.exists()

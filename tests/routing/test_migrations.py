"""Routing took over RoutingDecision and PerformanceRecord from analytics (routing 0004,
analytics 0004) in the migration state only: tables, rows, indexes, constraints and
the permissions granted on them stay as they were."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.apps.registry import Apps
from django.contrib.auth.models import Permission, User
from django.contrib.contenttypes.models import ContentType
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.test import Client

from routing.models import PerformanceRecord, RoutingDecision

pytestmark = pytest.mark.django_db(transaction=True)  # migrations run outside a test's transaction

BEFORE = [("analytics", "0003_scrub_fallback_chains"), ("routing", "0003_policy_llm_on_by_default")]
MOVED = [("analytics", "0004_decisions_are_routings"), ("routing", "0004_take_over_decisions")]
TABLES = ["analytics_routingdecision", "analytics_performancerecord"]


def _schema() -> dict[str, Any]:
    """Each moved table's columns and its constraints and indexes, by name."""
    introspection = connection.introspection
    with connection.cursor() as cursor:
        return {
            table: (
                [
                    (c.name, c.type_code, c.null_ok)
                    for c in introspection.get_table_description(cursor, table)
                ],
                introspection.get_constraints(cursor, table),
            )
            for table in TABLES
        }


def _migrate(targets: list[tuple[str, str]]) -> Apps:
    executor = MigrationExecutor(connection)
    executor.migrate(targets)
    ContentType.objects.clear_cache()  # the migration renamed rows this cache may hold
    return executor.loader.project_state(targets).apps


@pytest.fixture
def before_the_move() -> Iterator[Apps]:
    """The models as they were while analytics owned the decisions; afterwards, every app
    is back at its last migration, whatever the test did."""
    leaves = MigrationExecutor(connection).loader.graph.leaf_nodes()
    _migrate(leaves)  # from wherever an earlier test left the database
    yield _migrate(BEFORE)
    _migrate(leaves)


def test_the_move_changes_nothing_in_the_database(before_the_move: Apps) -> None:
    before = _schema()

    _migrate(MOVED)  # later migrations may change these tables: the move itself may not

    assert _schema() == before


def test_decisions_and_attempts_keep_their_rows_across_the_move(before_the_move: Apps) -> None:
    old = before_the_move
    tenant = old.get_model("flywheel", "Tenant").objects.create(name="T", slug="t")
    backend = old.get_model("backends", "Backend").objects.create(
        name="fw", kind="flowise", base_url="http://127.0.0.1:3100"
    )
    session = old.get_model("routing", "Session").objects.create(tenant=tenant)
    decision = old.get_model("analytics", "RoutingDecision").objects.create(
        tenant=tenant,
        session=session,
        backend=backend,
        question="Please review my pull request",
        intent="code-review",
        outcome="fallback",
        fallback_chain=[{"backend": "lf", "ok": False}, {"backend": "fw", "ok": True}],
        total_ms=12.5,
    )
    old.get_model("analytics", "PerformanceRecord").objects.create(
        backend=backend, decision=decision, intent="code-review", latency_ms=9.0, success=True
    )

    _migrate(MigrationExecutor(connection).loader.graph.leaf_nodes())

    moved = RoutingDecision.objects.get()
    assert (moved.pk, moved.request_id, moved.session_id, moved.backend_id) == (
        decision.pk,
        decision.request_id,
        session.pk,
        backend.pk,
    )
    assert (moved.question, moved.outcome, moved.total_ms) == (
        "Please review my pull request",
        "fallback",
        12.5,
    )
    assert moved.fallback_chain == decision.fallback_chain
    assert [(a.latency_ms, a.success) for a in moved.attempts.all()] == [(9.0, True)]
    assert PerformanceRecord.objects.get().backend_id == backend.pk
    # Ids carry on from the same sequence.
    later = RoutingDecision.objects.create(tenant_id=tenant.pk, question="q", outcome="success")
    assert later.pk > decision.pk


def test_who_could_see_the_trace_page_still_can(before_the_move: Apps) -> None:
    old = before_the_move
    # Granted while the permission was analytics' (auth's models did not change).
    permission = Permission.objects.get(
        content_type__app_label="analytics", codename="view_routingdecision"
    )
    operator = User.objects.create_user("operator", is_staff=True)
    operator.user_permissions.add(permission)
    tenant = old.get_model("flywheel", "Tenant").objects.create(name="T", slug="t")
    decision = old.get_model("analytics", "RoutingDecision").objects.create(
        tenant=tenant, question="Please review my pull request", outcome="success"
    )

    _migrate(MigrationExecutor(connection).loader.graph.leaf_nodes())

    assert not ContentType.objects.filter(app_label="analytics", model="routingdecision").exists()
    user = User.objects.get(username="operator")
    assert user.has_perm("routing.view_routingdecision")
    client = Client()
    client.force_login(user)
    page = client.get(f"/decisions/{decision.request_id}")
    assert page.status_code == 200
    assert "Please review my pull request" in page.content.decode()

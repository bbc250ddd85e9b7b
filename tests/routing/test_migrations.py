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

from routing.models import (
    Intent,
    IntentExample,
    IntentPattern,
    PerformanceRecord,
    RoutingDecision,
    RoutingPolicy,
)

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


BEFORE_LEARNING = [("routing", "0017_classifier_help_text")]


@pytest.mark.parametrize(("window", "migrated"), [(10, 100), (25, 25)])
def test_learned_estimates_count_a_hundred_attempts_where_ten_were_scored(
    window: int, migrated: int
) -> None:
    """Routing 0018: the seed's window of 10 attempts, scored raw, becomes the 100 that
    bound what the estimates count; a window an admin chose stays as it was."""
    leaves = MigrationExecutor(connection).loader.graph.leaf_nodes()
    _migrate(leaves)  # from wherever an earlier test left the database
    try:
        before = _migrate(BEFORE_LEARNING).get_model("routing", "RoutingPolicy")
        before.objects.all().delete()
        before.objects.create(key="default", performance_window=window, exploration_share=0.05)

        _migrate(leaves)

        policy = RoutingPolicy.objects.get()
        assert policy.performance_window == migrated
        assert (policy.half_life_seconds, policy.failure_cost_seconds) == (40.0, 5.0)
        assert (policy.half_life_attempts, policy.prior_strength) == (50.0, 2.0)
        assert policy.exploration == 0.5
    finally:
        _migrate(leaves)


BEFORE_ROUND_THREE = [("routing", "0019_hedging_and_splits")]


def test_an_installed_database_gets_this_releases_intents_and_keeps_admins_edits() -> None:
    """Routing 0020: summarize learns content summaries, jokes leave creative-orientation
    (only where its pattern is as shipped), the new shipped examples are added and the
    misfiled one moves; what an admin wrote stays."""
    from routing.migrations import __name__ as package

    migration = __import__(f"{package}.0020_intents_round_three", fromlist=["OLD_JOKES"])
    leaves = MigrationExecutor(connection).loader.graph.leaf_nodes()
    _migrate(leaves)
    try:
        apps = _migrate(BEFORE_ROUND_THREE)
        intents = apps.get_model("routing", "Intent").objects
        patterns = apps.get_model("routing", "IntentPattern").objects
        examples = apps.get_model("routing", "IntentExample").objects
        intents.all().delete()
        summarize = intents.create(
            slug="summarize",
            name=migration.OLD_SUMMARIZE[0],
            description=migration.OLD_SUMMARIZE[1],
        )
        creative = intents.create(slug="creative-orientation", name="Creative orientation")
        document = intents.create(slug="document-qa", name="Document Q&A", description="mine")
        patterns.create(intent=creative, kind="regex", pattern=migration.OLD_JOKES, weight=2.5)
        edited = patterns.create(intent=document, kind="regex", pattern=r"\bjokes?\b", weight=1)
        examples.create(intent=document, text=migration.CHAPTER_FINDINGS, source="shipped")
        examples.create(intent=document, text="my own example", source="admin")

        _migrate(leaves)

        summarize.refresh_from_db()
        assert summarize.name == "Summarize"
        assert set(IntentPattern.objects.filter(intent__slug="summarize").values_list(
            "pattern", flat=True
        )) == {p for p, _ in migration.SUMMARIZE_CONTENT}  # fmt: skip
        assert IntentPattern.objects.get(intent__slug="creative-orientation").pattern == (
            migration.NEW_JOKES
        )
        assert IntentPattern.objects.get(pk=edited.pk).pattern == r"\bjokes?\b"
        assert Intent.objects.get(slug="document-qa").description == "mine"
        moved = IntentExample.objects.get(text=migration.CHAPTER_FINDINGS)
        assert moved.intent.slug == "summarize"
        assert IntentExample.objects.filter(text="my own example").exists()
        shipped_for = IntentExample.objects.filter(source="shipped").values_list(
            "intent__slug", flat=True
        )
        assert set(shipped_for) == {"summarize", "creative-orientation", "document-qa"}
        assert IntentExample.objects.filter(intent__slug="summarize").count() > 90
    finally:
        IntentExample.objects.all().delete()
        Intent.objects.all().delete()
        _migrate(leaves)

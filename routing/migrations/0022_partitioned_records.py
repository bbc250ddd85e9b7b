"""Decisions, performance records and turns: partitioned by day on PostgreSQL.

Each table is rebuilt as one partitioned by range of created_at (flywheel.partitions),
its rows moved over, with a partition per day from the oldest row the retention keeps
(FLYWHEEL_RETENTION_DAYS) to FLYWHEEL_PARTITIONS_AHEAD_DAYS ahead, and a default one
for anything else (older rows, until retention deletes them). A request id becomes
unique with its created_at, as a partitioned table's unique keys must hold it.
Indexes another index already starts with are dropped (the tenant's, the session's, the
backend's), and a decision's session is indexed only where it has one. SQLite keeps plain tables. Reversible: the tables become plain again.
"""

from datetime import timedelta

import django.db.models.deletion
import django.utils.timezone
import flywheel.ids
from django.conf import settings
from django.db import migrations, models
from django.utils import timezone

from flywheel.partitions import partitioned_convert, partitioned_revert

TABLES = ("analytics_routingdecision", "analytics_performancerecord", "routing_turn")


def partition(apps, schema_editor) -> None:
    if schema_editor.connection.vendor != "postgresql":
        return
    today = timezone.now().date()
    last = today + timedelta(days=settings.PARTITIONS_AHEAD_DAYS)
    for table in TABLES:
        with schema_editor.connection.cursor() as cursor:
            cursor.execute(f"SELECT min(created_at) FROM {table}")  # noqa: S608
            oldest = cursor.fetchone()[0]
        kept = today - timedelta(days=settings.RETENTION_DAYS)
        first = max(oldest.date(), kept) if oldest else today
        partitioned_convert(table, first, last)


def unpartition(apps, schema_editor) -> None:
    if schema_editor.connection.vendor != "postgresql":
        return
    for table in TABLES:
        partitioned_revert(table)


class Migration(migrations.Migration):
    dependencies = [
        ("backends", "0005_backend_kinds_from_registry"),
        ("chatflows", "0004_flow_scope_edited_tunable"),
        ("flywheel", "0003_membership"),
        ("routing", "0021_performance_record_ended_at"),
    ]

    operations = [
        migrations.AlterField(
            model_name="performancerecord",
            name="backend",
            field=models.ForeignKey(
                db_constraint=False,
                db_index=False,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="performance",
                to="backends.backend",
            ),
        ),
        migrations.AlterField(
            model_name="routingdecision",
            name="created_at",
            field=models.DateTimeField(db_index=True, default=django.utils.timezone.now),
        ),
        migrations.AlterField(
            model_name="routingdecision",
            name="request_id",
            field=models.UUIDField(default=flywheel.ids.uuid7, editable=False),
        ),
        migrations.AlterField(
            model_name="routingdecision",
            name="tenant",
            field=models.ForeignKey(
                db_index=False,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="decisions",
                to="flywheel.tenant",
            ),
        ),
        migrations.AlterField(
            model_name="session",
            name="tenant",
            field=models.ForeignKey(
                db_index=False,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="sessions",
                to="flywheel.tenant",
            ),
        ),
        migrations.AlterField(
            model_name="turn",
            name="session",
            field=models.ForeignKey(
                db_constraint=False,
                db_index=False,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="turns",
                to="routing.session",
            ),
        ),
        migrations.AddConstraint(
            model_name="routingdecision",
            constraint=models.UniqueConstraint(
                fields=("request_id", "created_at"), name="decision_request_once"
            ),
        ),
        migrations.AlterField(
            model_name="routingdecision",
            name="session",
            field=models.ForeignKey(
                blank=True,
                db_constraint=False,
                db_index=False,
                null=True,
                on_delete=django.db.models.deletion.SET_NULL,
                related_name="decisions",
                to="routing.session",
            ),
        ),
        migrations.AddIndex(
            model_name="routingdecision",
            index=models.Index(
                condition=models.Q(("session__isnull", False)),
                fields=["session"],
                name="decision_session",
            ),
        ),
        migrations.RunPython(partition, unpartition),
    ]

# Routing takes over the models it writes, RoutingDecision and PerformanceRecord, from
# the analytics app (which only reads them now): in the migration state only. Their
# tables keep their names (db_table), and so do their columns, indexes, constraints and
# foreign keys: the database is not touched. analytics 0004 removes them from its state.

import uuid

import django.db.models.deletion
from django.db import migrations, models

DECISION = migrations.CreateModel(
    name="RoutingDecision",
    fields=[
        ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
        ("request_id", models.UUIDField(default=uuid.uuid4, editable=False, unique=True)),
        ("question", models.TextField()),
        ("intent", models.CharField(blank=True, max_length=50)),
        ("intent_confidence", models.FloatField(blank=True, null=True)),
        ("intent_method", models.CharField(blank=True, choices=[("rules", "Rules"), ("context", "Conversation context"), ("llm", "LLM"), ("override", "Override")], max_length=10)),
        ("query_type", models.CharField(blank=True, choices=[("GLOBAL", "Global"), ("LOCAL", "Local"), ("HYBRID", "Hybrid")], max_length=10)),
        ("query_type_confidence", models.FloatField(blank=True, null=True)),
        ("evidence", models.JSONField(blank=True, default=dict, help_text="Why: the intent's matched patterns (or context), the query type's reasoning and weights.")),
        ("routing_method", models.CharField(choices=[("auto", "Automatic"), ("explicit", "Explicit backend")], default="auto", max_length=10)),
        ("score", models.FloatField(blank=True, null=True)),
        ("candidates", models.JSONField(blank=True, default=list, help_text="Each candidate with its factor scores.")),
        ("fallback_chain", models.JSONField(blank=True, default=list, help_text="Each attempt, in order, with its outcome.")),
        ("outcome", models.CharField(choices=[("success", "Answered by the first choice"), ("fallback", "Answered after a fallback"), ("cached", "Answered from cache"), ("failed", "Failed"), ("rejected", "Rejected before routing")], max_length=10)),
        ("error_type", models.CharField(blank=True, max_length=50)),
        ("classify_ms", models.FloatField(default=0)),
        ("route_ms", models.FloatField(default=0)),
        ("execute_ms", models.FloatField(default=0)),
        ("total_ms", models.FloatField(default=0)),
        ("created_at", models.DateTimeField(auto_now_add=True, db_index=True)),
        ("backend", models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name="decisions", to="backends.backend")),
        ("flow", models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name="decisions", to="chatflows.flow")),
        ("session", models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name="decisions", to="routing.session")),
        ("tenant", models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name="decisions", to="flywheel.tenant")),
    ],
    options={
        "db_table": "analytics_routingdecision",
        "ordering": ["-created_at"],
        "indexes": [models.Index(fields=["tenant", "-created_at"], name="decision_tenant_recent")],
        "constraints": [
            models.CheckConstraint(condition=models.Q(("outcome__in", ["success", "fallback", "cached", "failed", "rejected"])), name="decision_outcome_valid"),
            models.CheckConstraint(condition=models.Q(("classify_ms__gte", 0), ("execute_ms__gte", 0), ("route_ms__gte", 0), ("total_ms__gte", 0)), name="decision_timings_non_negative"),
        ],
    },
)

PERFORMANCE = migrations.CreateModel(
    name="PerformanceRecord",
    fields=[
        ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
        ("intent", models.CharField(max_length=50)),
        ("latency_ms", models.FloatField()),
        ("success", models.BooleanField()),
        ("error_type", models.CharField(blank=True, max_length=50)),
        ("created_at", models.DateTimeField(auto_now_add=True)),
        ("backend", models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name="performance", to="backends.backend")),
        ("flow", models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name="+", to="chatflows.flow")),
        ("decision", models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name="attempts", to="routing.routingdecision")),
    ],
    options={
        "db_table": "analytics_performancerecord",
        "ordering": ["-created_at"],
        "indexes": [models.Index(fields=["backend", "intent", "-created_at"], name="perf_backend_intent_recent")],
        "constraints": [
            models.CheckConstraint(condition=models.Q(("latency_ms__gte", 0)), name="perf_latency_non_negative"),
        ],
    },
)


class Migration(migrations.Migration):

    dependencies = [
        ("backends", "0003_scrub_stored_errors"),
        ("chatflows", "0002_rename_discover_flows_task"),
        ("flywheel", "0002_apikey_rate_limit"),
        ("routing", "0003_policy_llm_on_by_default"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(state_operations=[DECISION, PERFORMANCE]),
    ]

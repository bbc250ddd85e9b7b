from django.db import migrations, models


def recount(apps, schema_editor):
    """Rows rolled up before this migration have no counts per method: drop them and
    let the next refresh (beat, every minute, or ``manage.py rollup_decisions``)
    roll every decision up again. Until then the reads count the raw rows."""
    apps.get_model("analytics", "DecisionRollup").objects.all().delete()
    apps.get_model("analytics", "RollupState").objects.update(last_decision_id=0)


class Migration(migrations.Migration):
    dependencies = [
        ("analytics", "0006_schedule_rollups"),
    ]

    operations = [
        migrations.AddField(
            model_name="decisionrollup",
            name="methods",
            field=models.JSONField(blank=True, default=dict),
        ),
        migrations.RunPython(recount, migrations.RunPython.noop),
    ]

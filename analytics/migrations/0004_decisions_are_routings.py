# RoutingDecision and PerformanceRecord are routing's now (routing 0004 took them over,
# in the migration state only): analytics lets go of them, in the state only, so their
# tables stay as they are. Their content types move with them, so the permissions
# granted on them (such as view_routingdecision, which the trace page asks for) and the
# admin's history of them are kept.

from django.db import migrations

MODELS = ("routingdecision", "performancerecord")


def _move_content_types(apps, schema_editor, source, target):
    ContentType = apps.get_model("contenttypes", "ContentType")
    types = ContentType.objects.db_manager(schema_editor.connection.alias)
    for model in MODELS:
        # Content types are made after migrating (post_migrate): on a new database there
        # are none yet, and the target's exists only if a partial migrate made it; then
        # the source's is left for remove_stale_contenttypes.
        if not types.filter(app_label=target, model=model).exists():
            types.filter(app_label=source, model=model).update(app_label=target)
    types.clear_cache()


def to_routing(apps, schema_editor):
    _move_content_types(apps, schema_editor, "analytics", "routing")


def to_analytics(apps, schema_editor):
    _move_content_types(apps, schema_editor, "routing", "analytics")


class Migration(migrations.Migration):

    dependencies = [
        ("analytics", "0003_scrub_fallback_chains"),
        ("contenttypes", "0002_remove_content_type_name"),
        ("routing", "0004_take_over_decisions"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.DeleteModel(name="PerformanceRecord"),
                migrations.DeleteModel(name="RoutingDecision"),
            ]
        ),
        migrations.RunPython(to_routing, to_analytics),
    ]

"""Beat applies the retention every hour (makes the coming days' partitions, drops
what is past the retention): add its periodic task where the default schedules were
already installed (analytics/migrations/_schedules.py).
"""

from django.db import migrations

from analytics.migrations._schedules import schedule_added

forwards, backwards = schedule_added(
    "Keep storage bounded",
    "analytics.apply_retention",
    3600,
    # The tasks load_defaults installed before this one existed.
    installed=("backends.check_health", "chatflows.discover_flows", "analytics.rollup_decisions"),
)


class Migration(migrations.Migration):
    dependencies = [
        ("analytics", "0008_rollup_usage"),
        ("django_celery_beat", "0001_initial"),
    ]

    operations = [migrations.RunPython(forwards, backwards)]

"""Beat packs the indexes of the days that have passed every hour: add its periodic
task where the default schedules were already installed
(analytics/migrations/_schedules.py).
"""

from django.db import migrations

from analytics.migrations._schedules import schedule_added

forwards, backwards = schedule_added(
    "Pack the indexes of passed days",
    "analytics.pack_indexes",
    3600,
    # The tasks load_defaults installed before this one existed.
    installed=("backends.check_health", "analytics.apply_retention"),
)


class Migration(migrations.Migration):
    dependencies = [
        ("analytics", "0010_rollups_raw_since"),
        ("django_celery_beat", "0001_initial"),
    ]

    operations = [migrations.RunPython(forwards, backwards)]

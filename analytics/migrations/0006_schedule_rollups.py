"""Beat rolls decisions up every minute: add its periodic task where the default
schedules were already installed (analytics/migrations/_schedules.py).
"""

from django.db import migrations

from analytics.migrations._schedules import schedule_added

forwards, backwards = schedule_added(
    "Roll up decisions",
    "analytics.rollup_decisions",
    60,
    # The tasks load_defaults installed before this one existed.
    installed=("backends.check_health", "chatflows.discover_flows", "routing.publish_performance"),
)


class Migration(migrations.Migration):
    dependencies = [
        ("analytics", "0005_rollup_buckets"),
        ("django_celery_beat", "0001_initial"),
    ]

    operations = [migrations.RunPython(forwards, backwards)]

"""Beat applies the retention every hour (makes the coming days' partitions, drops
what is past the retention): add its periodic task where the default
schedules were already installed (load_defaults installs them, this one included,
on a new database).

A row someone already made for the task is left as it is. Reversible.
"""

from django.db import migrations
from django.utils import timezone

NAME = "Keep storage bounded"
TASK = "analytics.apply_retention"
EVERY_SECONDS = 3600
# The tasks load_defaults installed before this one existed.
INSTALLED = ("backends.check_health", "chatflows.discover_flows", "analytics.rollup_decisions")


def _schedules_changed(apps) -> None:
    # What PeriodicTasks.update_changed() does (not on a historical model): a running
    # beat (DatabaseScheduler) reloads its schedule when this moves.
    PeriodicTasks = apps.get_model("django_celery_beat", "PeriodicTasks")
    PeriodicTasks.objects.update_or_create(ident=1, defaults={"last_update": timezone.now()})


def forwards(apps, schema_editor) -> None:
    PeriodicTask = apps.get_model("django_celery_beat", "PeriodicTask")
    IntervalSchedule = apps.get_model("django_celery_beat", "IntervalSchedule")
    if not PeriodicTask.objects.filter(task__in=INSTALLED).exists():
        return  # never installed: load_defaults will install it with the others
    if PeriodicTask.objects.filter(name=NAME).exists() or PeriodicTask.objects.filter(
        task=TASK
    ).exists():
        return
    interval, _ = IntervalSchedule.objects.get_or_create(every=EVERY_SECONDS, period="seconds")
    PeriodicTask.objects.create(name=NAME, task=TASK, interval=interval)
    _schedules_changed(apps)


def backwards(apps, schema_editor) -> None:
    PeriodicTask = apps.get_model("django_celery_beat", "PeriodicTask")
    if PeriodicTask.objects.filter(name=NAME, task=TASK).delete()[0]:
        _schedules_changed(apps)


class Migration(migrations.Migration):
    dependencies = [
        ("analytics", "0008_rollup_usage"),
        ("django_celery_beat", "0001_initial"),
    ]

    operations = [migrations.RunPython(forwards, backwards)]

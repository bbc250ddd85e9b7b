"""Beat's "Discover flows" rows name the task where it now lives: chatflows, not backends.

The rows keep their name, interval and enabled state as the admin left them;
only the task they run is renamed. Reversible.
"""

from django.db import migrations
from django.utils import timezone

OLD = "backends.discover_flows"
NEW = "chatflows.discover_flows"


def _rename(apps, old: str, new: str) -> None:
    PeriodicTask = apps.get_model("django_celery_beat", "PeriodicTask")
    PeriodicTasks = apps.get_model("django_celery_beat", "PeriodicTasks")
    if PeriodicTask.objects.filter(task=old).update(task=new):
        # What PeriodicTasks.update_changed() does (not on a historical model): a
        # running beat (DatabaseScheduler) reloads its schedule when this moves.
        PeriodicTasks.objects.update_or_create(ident=1, defaults={"last_update": timezone.now()})


def forwards(apps, schema_editor) -> None:
    _rename(apps, OLD, NEW)


def backwards(apps, schema_editor) -> None:
    _rename(apps, NEW, OLD)


class Migration(migrations.Migration):
    dependencies = [
        ("chatflows", "0001_initial"),
        ("django_celery_beat", "0001_initial"),
    ]

    operations = [migrations.RunPython(forwards, backwards)]

"""What a migration that adds a default periodic task does (Django's loader skips a
module whose name starts with "_": this is no migration of its own).

The task is added where the default schedules were already installed (load_defaults
installs them all, the new one included, on a new database); a row someone already
made for it is left as it is. Reversible.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.utils import timezone

RunPython = Callable[[Any, Any], None]


def _schedules_changed(apps: Any) -> None:
    # What PeriodicTasks.update_changed() does (not on a historical model): a running
    # beat (DatabaseScheduler) reloads its schedule when this moves.
    PeriodicTasks = apps.get_model("django_celery_beat", "PeriodicTasks")
    PeriodicTasks.objects.update_or_create(ident=1, defaults={"last_update": timezone.now()})


def schedule_added(
    name: str, task: str, every_seconds: int, installed: tuple[str, ...]
) -> tuple[RunPython, RunPython]:
    """The forwards and backwards functions that add periodic task ``name`` (running
    ``task`` every ``every_seconds``) where a task of ``installed`` (what
    load_defaults installed before it existed) is there, and remove it."""

    def forwards(apps: Any, schema_editor: Any) -> None:
        PeriodicTask = apps.get_model("django_celery_beat", "PeriodicTask")
        IntervalSchedule = apps.get_model("django_celery_beat", "IntervalSchedule")
        if not PeriodicTask.objects.filter(task__in=installed).exists():
            return  # never installed: load_defaults will install it with the others
        if PeriodicTask.objects.filter(name=name).exists() or PeriodicTask.objects.filter(
            task=task
        ).exists():
            return
        interval, _ = IntervalSchedule.objects.get_or_create(
            every=every_seconds, period="seconds"
        )
        PeriodicTask.objects.create(name=name, task=task, interval=interval)
        _schedules_changed(apps)

    def backwards(apps: Any, schema_editor: Any) -> None:
        PeriodicTask = apps.get_model("django_celery_beat", "PeriodicTask")
        if PeriodicTask.objects.filter(name=name, task=task).delete()[0]:
            _schedules_changed(apps)

    return forwards, backwards

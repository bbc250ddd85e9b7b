"""The periodic tasks beat runs, stored in the database and editable in the admin."""

from __future__ import annotations

from django_celery_beat.models import IntervalSchedule, PeriodicTask

# name -> (task, every N seconds)
DEFAULT_SCHEDULES = {
    "Check backend health": ("backends.check_health", 30),
    "Discover flows": ("chatflows.discover_flows", 60),
    "Share backend performance": ("routing.publish_performance", 300),
    # analytics/migrations/0006 adds it where the others were installed before it.
    "Roll up decisions": ("analytics.rollup_decisions", 60),
    # analytics/migrations/0009 adds it where the others were installed before it.
    "Keep storage bounded": ("analytics.apply_retention", 3600),
    # analytics/migrations/0011 adds it where the others were installed before it.
    "Pack the indexes of passed days": ("analytics.pack_indexes", 3600),
    # A no-op unless examples changed since the newest version (a lost enqueue).
    "Train classifiers": ("routing.train_classifiers", 60),
}


def schedules_install() -> int:
    """Create the default periodic tasks that are missing; returns how many were created.

    Existing ones are left as the admin set them (interval, enabled, ...).
    """
    created = 0
    for name, (task, seconds) in DEFAULT_SCHEDULES.items():
        if PeriodicTask.objects.filter(name=name).exists():
            continue
        interval, _ = IntervalSchedule.objects.get_or_create(
            every=seconds, period=IntervalSchedule.SECONDS
        )
        PeriodicTask.objects.create(name=name, task=task, interval=interval)
        created += 1
    return created

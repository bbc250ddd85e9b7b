"""Install the default tenant, intents, patterns and routing policy (idempotent)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from routing.services import defaults_load


class Command(BaseCommand):
    help = "Install the default intents, patterns, scope patterns and routing policy."

    def handle(self, *args: Any, **options: Any) -> None:
        report = defaults_load()
        self.stdout.write(
            f"Defaults: {report.intents_created} intent(s), {report.patterns_created} "
            f"pattern(s), {report.scope_patterns_created} scope pattern(s) created; "
            f"policy {'created' if report.policy_created else 'kept'}; "
            f"{report.schedules_created} periodic task(s) created."
        )

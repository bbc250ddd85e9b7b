"""Roll decisions up now (beat does it every minute), and say what was done."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from analytics.rollups import rollups_refresh


class Command(BaseCommand):
    help = "Roll the decisions written since the last run up into minute and hour rows."

    def handle(self, *args: Any, **options: Any) -> None:
        report = rollups_refresh()
        self.stdout.write(
            f"Rolled up {report['decisions']} new decision(s) (up to id "
            f"{report['last_decision_id']}): {report['minutes']} minute(s) and "
            f"{report['hours']} hour(s) recomputed, {report['rows']} row(s) written, "
            f"{report['pruned']} old minute row(s) pruned."
        )

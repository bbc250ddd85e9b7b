"""Write the decisions that killed processes left in the spool (servers also do this
at start-up and every half minute)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from routing.recording.writer import decision_spool, spooled_replay


class Command(BaseCommand):
    help = "Write the decisions that processes which died left in the decision spool."

    def handle(self, *args: Any, **options: Any) -> None:
        replayed = spooled_replay()
        where = decision_spool().directory
        self.stdout.write(f"Replayed {replayed} spooled decisions from {where}.")

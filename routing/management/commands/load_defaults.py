"""Install the defaults (idempotent) and leave trained classifiers in place."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from routing.classification.training import classifiers_train
from routing.install import defaults_load


class Command(BaseCommand):
    help = (
        "Install the default intents, patterns, scope patterns, examples and routing policy, "
        "and train the classifiers on the examples (no worker needed)."
    )

    def handle(self, *args: Any, **options: Any) -> None:
        report = defaults_load()
        self.stdout.write(
            f"Defaults: {report.intents_created} intent(s), {report.patterns_created} "
            f"pattern(s), {report.scope_patterns_created} scope pattern(s), "
            f"{report.examples_created} example(s) created; "
            f"policy {'created' if report.policy_created else 'kept'}; "
            f"{report.schedules_created} periodic task(s) created."
        )
        for row in classifiers_train(progress=self._progress):
            self.stdout.write(f"Classifier: {row}")

    def _progress(self, line: str) -> None:
        self.stdout.write(line)
        self.stdout.flush()  # seen now, not once the training is over

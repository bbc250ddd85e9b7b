"""Train the learned classifiers on their examples now."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from routing.classification.training import KINDS, classifier_train


class Command(BaseCommand):
    help = "Train the intent and query-type classifiers on their examples."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--kind", choices=[str(k) for k in KINDS], help="Only this one.")
        parser.add_argument(
            "--force", action="store_true", help="Train even if the examples have not changed."
        )

    def handle(self, *args: Any, **options: Any) -> None:
        kinds = [options["kind"]] if options["kind"] else [str(k) for k in KINDS]
        for kind in kinds:
            row = classifier_train(kind=kind, force=options["force"])
            self.stdout.write(f"Classifier: {row}" if row else f"{kind}: too few labels to train")

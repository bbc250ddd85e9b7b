"""Read an export of export_decisions back into the decisions and performance records
(a scratch database, or a day restored after its partition was dropped)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from analytics.export import DEFAULT_BATCH, decisions_import
from flywheel.errors import ValidationError


class Command(BaseCommand):
    help = (
        "Read an export of export_decisions back into the tables, in one transaction: "
        "import_decisions PATH, either of its two files (the other is read from beside "
        "it). Rows stored already are skipped (a decision by its request id, a "
        "performance record by its id), so importing twice adds nothing. The tenants "
        "must be in the database."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("path", help="decisions-...jsonl.gz or performance-...jsonl.gz")
        parser.add_argument(
            "--batch",
            type=int,
            default=DEFAULT_BATCH,
            metavar="N",
            help="Rows written per database round trip (default: %(default)s).",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if options["batch"] < 1:
            raise CommandError("--batch must be at least 1.")
        try:
            tables = decisions_import(path=Path(options["path"]), batch=options["batch"])
        except ValidationError as err:
            raise CommandError(err.message) from err
        for each in tables:
            self.stdout.write(
                f"{each.table}: {each.added} rows imported, {each.skipped} there already, "
                f"{each.path}"
            )

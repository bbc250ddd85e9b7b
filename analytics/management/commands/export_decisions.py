"""Write the decisions and performance records of a window of time to files, for the
long term (object storage, a warehouse) before their partition is dropped."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

from analytics.export import DEFAULT_BATCH, decisions_export, moment_parse
from backends.management.owner import owner
from flywheel.errors import ValidationError


class Command(BaseCommand):
    help = (
        "Write the decisions and performance records created from --since up to --until "
        "into --out as two gzip-compressed JSON Lines files, "
        "decisions-<since>-<until>[-<tenant>].jsonl.gz and performance-<...>.jsonl.gz "
        "(times in UTC): one JSON object per row with every column. Each file appears "
        "only once both are complete; an export already there is never overwritten. "
        "import_decisions reads one back."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--since",
            required=True,
            metavar="WHEN",
            help="From this moment on: an ISO date or datetime, UTC unless it gives an "
            "offset (2026-11-01, 2026-11-01T06:00, 2026-11-01T06:00+02:00).",
        )
        parser.add_argument(
            "--until", metavar="WHEN", help="Up to this moment, not included (default: now)."
        )
        parser.add_argument(
            "--tenant",
            metavar="SLUG",
            help="Only this tenant's decisions and their performance records (default: "
            "every row of both tables).",
        )
        parser.add_argument(
            "--out",
            metavar="DIR",
            default=str(settings.VAR_DIR / "exports"),
            help="The directory the two files are written to, created if need be "
            "(default: %(default)s).",
        )
        parser.add_argument(
            "--batch",
            type=int,
            default=DEFAULT_BATCH,
            metavar="N",
            help="Rows read per database round trip (default: %(default)s).",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        since = _moment(options["since"], "--since")
        until = _moment(options["until"], "--until") if options["until"] else timezone.now()
        if options["batch"] < 1:
            raise CommandError("--batch must be at least 1.")
        tenant = owner(options["tenant"])
        try:
            files = decisions_export(
                since=since, until=until, out=Path(options["out"]), tenant=tenant,
                batch=options["batch"],
            )  # fmt: skip
        except ValidationError as err:
            raise CommandError(err.message) from err
        except OSError as err:
            raise CommandError(f"The export could not be written: {err}") from err
        for each in files:
            self.stdout.write(f"{each.table}: {each.rows} rows, {each.bytes} bytes, {each.path}")


def _moment(text: str, option: str) -> datetime:
    try:
        return moment_parse(text)
    except ValueError:
        raise CommandError(
            f"{option} {text!r} is not an ISO date or datetime "
            "(2026-11-01, 2026-11-01T06:00, 2026-11-01T06:00+02:00)."
        ) from None

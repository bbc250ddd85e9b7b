"""Discover flows now, printing progress and counts per backend.

``--backend`` and ``--tenant`` choose the backend as every backend command does
(backends/management/owner.py).
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from backends.adapters import run_sync
from backends.errors import BackendError
from backends.management.owner import add_owner_arguments, chosen_backends
from chatflows.services import adiscover_all


class Command(BaseCommand):
    help = "Discover the flows of every enabled backend (or one): added, updated, removed."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--backend", help="Only this backend (by name).")
        add_owner_arguments(parser)

    def handle(self, *args: Any, **options: Any) -> None:
        backends = chosen_backends(options)
        failed = 0
        for backend in backends:
            self.stdout.write(f"{backend.name}: discovering…")
            (report,) = run_sync(adiscover_all, [backend])
            if isinstance(report, BackendError):
                failed += 1
                self.stdout.write(f"{backend.name}: failed: {report.message}")
                continue
            self.stdout.write(f"{backend.name}: {report.total} flow(s): {report.counts}")
        if failed:
            raise CommandError(f"Discovery failed for {failed} backend(s).")

"""Probe backends now and print a table of results."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from backends.adapters import run_sync
from backends.errors import BackendError
from backends.management.owner import add_owner_arguments, chosen_backends
from backends.services import ahealth_check_all


class Command(BaseCommand):
    help = "Check the health of every enabled backend (or one) and print the results."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--backend", help="Only this backend (by name).")
        add_owner_arguments(parser)

    def handle(self, *args: Any, **options: Any) -> None:
        backends = chosen_backends(options)
        outcomes = run_sync(ahealth_check_all, list(backends))
        self.stdout.write(f"{'backend':<24} {'status':<10} {'latency ms':>10}  error")
        failures = 0
        for backend, outcome in zip(backends, outcomes, strict=True):
            if isinstance(outcome, BackendError):
                failures += 1
                self.stdout.write(f"{backend.name:<24} {'error':<10} {'':>10}  {outcome.message}")
                continue
            status = "ok" if outcome.ok else "down"
            if outcome.in_cooldown:
                status += "*"
            failures += not outcome.ok
            latency = f"{outcome.latency_ms:.1f}" if outcome.latency_ms is not None else ""
            self.stdout.write(f"{outcome.backend:<24} {status:<10} {latency:>10}  {outcome.error}")
        if failures:
            self.stderr.write(f"{failures} backend(s) unhealthy (* = in cooldown).")

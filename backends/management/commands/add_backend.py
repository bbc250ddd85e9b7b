"""Register a Flowise or Langflow server as a backend, probe it and discover its flows."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from backends.adapters import kinds
from backends.management.owner import add_owner_arguments, owner
from backends.selectors import backend_find
from backends.services import (
    backend_create,
    backend_onboard,
    backend_update,
    onboarding_lines,
)
from flywheel.errors import ApplicationError


class Command(BaseCommand):
    help = (
        "Register a shared backend, or one owned by --tenant, then probe its health and "
        "discover its flows at once, and print what was found (the first line: its id). "
        "With --update, change the existing one of that name and owner. Backends "
        "registered here are trusted: they may point at private addresses."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--name", required=True)
        parser.add_argument("--kind", required=True, choices=kinds())
        parser.add_argument("--url", required=True, help="Base URL, e.g. http://127.0.0.1:3000")
        parser.add_argument(
            "--api-key", default="", help="The backend's API key (stored, never shown)."
        )
        parser.add_argument("--timeout", type=float, default=None, help="Run timeout, seconds.")
        add_owner_arguments(parser)
        parser.add_argument(
            "--update",
            action="store_true",
            help="Update the backend of that name and owner if it exists.",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        tenant = owner(options["tenant"])
        fields: dict[str, Any] = {"kind": options["kind"], "base_url": options["url"]}
        if options["api_key"]:
            fields["api_key"] = options["api_key"]
        if options["timeout"] is not None:
            fields["timeout_seconds"] = options["timeout"]
        # Only a backend of the same owner is ever updated: another owner's backend
        # of the same name is a different backend, and must never receive this key.
        existing = backend_find(name=options["name"], tenant=tenant)
        try:
            if existing and options["update"]:
                backend = backend_update(backend=existing, trusted=True, **fields)
            elif existing:
                raise CommandError(
                    f"A backend named {existing.name!r} exists (id {existing.pk}); "
                    "pass --update to change it."
                )
            else:
                backend = backend_create(
                    name=options["name"], tenant=tenant, trusted=True, **fields
                )
        except ApplicationError as err:
            raise CommandError(f"{err.message} {err.details.get('fields', '')}") from err
        done = "Updated" if existing else "Registered"
        self.stdout.write(
            f"{backend.pk}: {done} backend {backend.name!r} ({backend.kind} at {backend.base_url})."
        )
        for line in onboarding_lines(backend_onboard(backend=backend), backend=backend):
            self.stdout.write(f"  {line}")

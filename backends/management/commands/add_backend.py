"""Register a Flowise or Langflow server as a backend and print its id."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from backends.models import Backend, BackendKind
from backends.services import backend_create, backend_update
from flywheel.errors import ValidationError


class Command(BaseCommand):
    help = "Register a backend (prints its id). With --update, change an existing one of that name."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--name", required=True)
        parser.add_argument("--kind", required=True, choices=BackendKind.values)
        parser.add_argument("--url", required=True, help="Base URL, e.g. http://127.0.0.1:3000")
        parser.add_argument(
            "--api-key", default="", help="The backend's API key (stored, never shown)."
        )
        parser.add_argument("--timeout", type=float, default=None, help="Run timeout, seconds.")
        parser.add_argument(
            "--update", action="store_true", help="Update the backend if the name exists."
        )

    def handle(self, *args: Any, **options: Any) -> None:
        fields: dict[str, Any] = {"kind": options["kind"], "base_url": options["url"]}
        if options["api_key"]:
            fields["api_key"] = options["api_key"]
        if options["timeout"] is not None:
            fields["timeout_seconds"] = options["timeout"]
        existing = Backend.objects.filter(name__iexact=options["name"]).first()
        try:
            if existing and options["update"]:
                backend = backend_update(backend=existing, **fields)
            elif existing:
                raise CommandError(
                    f"A backend named {existing.name!r} exists (id {existing.pk}); "
                    "pass --update to change it."
                )
            else:
                backend = backend_create(name=options["name"], **fields)
        except ValidationError as err:
            raise CommandError(f"{err.message} {err.details.get('fields', '')}") from err
        self.stdout.write(str(backend.pk))

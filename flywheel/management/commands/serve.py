"""Serve Flywheel over HTTP with uvicorn, as the settings say (flywheel/serving.py)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from flywheel.links import served_at
from flywheel.serving import APPLICATION, uvicorn_options


class Command(BaseCommand):
    help = (
        "Serve Flywheel (web pages, REST API, query fast lane) with uvicorn, its forwarded "
        "headers and read limits taken from the settings."
    )
    requires_system_checks: list[str] = []  # each worker imports the application itself

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument("--port", type=int, default=8000)
        parser.add_argument("--workers", type=int, default=1, help="One per core.")

    def handle(self, *args: Any, **options: Any) -> None:
        import uvicorn

        if options["workers"] < 1:
            raise CommandError("--workers must be at least 1.")
        served_at(options["host"], options["port"])  # for the links `ask` and MCP print
        uvicorn.run(
            APPLICATION,
            host=options["host"],
            port=options["port"],
            workers=options["workers"],
            lifespan="on",
            **uvicorn_options(),
        )

"""Serve Flywheel's tools to agents over MCP: stdio (default) or streamable HTTP."""

from __future__ import annotations

import logging
import os
import sys
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import DatabaseError

from flywheel.errors import AuthenticationError
from flywheel.models import ApiKey
from flywheel.services import api_key_authenticate

logger = logging.getLogger("agents")

KEY_VARIABLE = "FLYWHEEL_API_KEY"


def _one_line(err: BaseException) -> str:
    return " ".join(str(err).split())[:300]


def startup_key(raw_key: str, source: str = KEY_VARIABLE) -> ApiKey:
    """The key the stdio server acts as, checked before serving; ``source`` is where it
    was given (--api-key or the variable), named when it is refused.

    Raises CommandError (one line on stderr, exit status 1) for a missing,
    unknown or revoked key, or a database that cannot be reached.
    """
    if not raw_key.strip():
        raise CommandError(
            f"No API key: set {KEY_VARIABLE} (or pass --api-key) to a Flywheel API key "
            "(python manage.py create_api_key --name NAME makes one)."
        )
    pool_log = logging.getLogger("psycopg.pool")
    level = pool_log.level
    pool_log.setLevel(logging.ERROR)  # a database that is down: the one line below says it
    try:
        return api_key_authenticate(raw_key=raw_key.strip())
    except AuthenticationError as err:
        raise CommandError(f"The key in {source} was refused: {err.message}") from err
    except DatabaseError as err:
        raise CommandError(f"Cannot reach the database to check the key: {_one_line(err)}") from err
    finally:
        pool_log.setLevel(level)


class Command(BaseCommand):
    help = (
        "Serve Flywheel's tools to agents over MCP. stdio (default) acts as the key in "
        f"{KEY_VARIABLE}; streamable HTTP takes 'Authorization: Bearer <key>' on every request."
    )
    # Start-up does django.setup() and nothing slow: no system checks (they import every URL
    # module), no migrations.
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--transport", choices=("stdio", "streamable-http"), default="stdio")
        parser.add_argument("--host", default="127.0.0.1", help="streamable-http: address")
        parser.add_argument("--port", type=int, default=8765, help="streamable-http: port")
        parser.add_argument(
            "--workers", type=int, default=1, help="streamable-http: worker processes"
        )
        parser.add_argument(
            "--api-key", default=None, help=f"stdio: the key to act as (default: ${KEY_VARIABLE})"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if options["transport"] == "stdio":
            given = options["api_key"]
            source = "--api-key" if given else KEY_VARIABLE
            self.serve_stdio(given or os.environ.get(KEY_VARIABLE, ""), source)
        else:
            self.serve_http(options["host"], options["port"], options["workers"])

    def serve_stdio(self, raw_key: str, source: str = KEY_VARIABLE) -> None:
        api_key = startup_key(raw_key, source)
        # stdout carries the protocol alone: everything else goes to stderr (settings.LOGGING).
        from agents.auth import KeyCaller
        from agents.server import build_server

        server = build_server(KeyCaller(raw_key.strip()))
        logger.info(
            "Serving MCP on stdio as key %s (tenant %s)", api_key.prefix, api_key.tenant.slug
        )
        sys.stdout.flush()
        server.run("stdio")

    def serve_http(self, host: str, port: int, workers: int) -> None:
        import uvicorn

        from flywheel.serving import uvicorn_options

        if workers < 1:
            raise CommandError("--workers must be at least 1.")
        logger.info("Serving MCP on http://%s:%s/mcp with %s worker(s)", host, port, workers)
        if workers > 1:  # each worker imports the app itself
            uvicorn.run(
                "agents.asgi:application",
                host=host,
                port=port,
                workers=workers,
                log_level="warning",
                lifespan="on",
                **uvicorn_options(),
            )
            return
        from agents.asgi import application

        uvicorn.run(
            application,
            host=host,
            port=port,
            log_level="warning",
            lifespan="on",
            **uvicorn_options(),
        )

"""The MCP door over streamable HTTP as an ASGI app.

``manage.py runmcp --transport streamable-http`` serves it; with several
workers (``--workers N``, or ``uvicorn agents.asgi:application --workers N``)
each process serves any request, since the MCP app is stateless (no
session held in a process's memory).
"""

from __future__ import annotations

import logging
import os
from typing import Any

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "flywheel.settings")
django.setup()

from django.conf import settings  # noqa: E402
from mcp.server.transport_security import TransportSecuritySettings  # noqa: E402

from agents.auth import BearerAuth, RequestCaller  # noqa: E402
from agents.server import build_server  # noqa: E402

PATH = "/mcp"

# Stateless mode ends a "session" with every request, and the SDK logs each end at INFO.
logging.getLogger("mcp.server.streamable_http").setLevel(logging.WARNING)


def transport_security() -> TransportSecuritySettings:
    """Host and Origin checks (DNS-rebinding protection) from DJANGO_ALLOWED_HOSTS, the one
    list of names Flywheel answers to; ``*`` there turns them off."""
    hosts: list[str] = list(settings.ALLOWED_HOSTS)
    if "*" in hosts:
        return TransportSecuritySettings(enable_dns_rebinding_protection=False)
    named = [f"[{h}]" if ":" in h else h for h in hosts]
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=[*named, *(f"{h}:*" for h in named)],
        allowed_origins=[
            f"{scheme}://{h}{port}"
            for h in named
            for scheme in ("http", "https")
            for port in ("", ":*")
        ],
    )


def build_app() -> Any:
    """The MCP server's Starlette app (stateless), behind the API-key check."""
    server = build_server(RequestCaller())
    mcp_app = server.streamable_http_app(
        streamable_http_path=PATH,
        stateless_http=True,
        # Plain JSON answers: no tool streams progress, and a JSON body costs less than
        # an SSE stream per call.
        json_response=True,
        transport_security=transport_security(),
    )
    return BearerAuth(mcp_app)


application = build_app()

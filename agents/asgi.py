"""The MCP door over streamable HTTP as an ASGI app.

``manage.py runmcp --transport streamable-http`` serves it, with the server
options of flywheel/serving.py; with several workers (``--workers N``) each
process serves any request, since the MCP app is stateless (no
session held in a process's memory).
"""

from __future__ import annotations

import logging
import os
from typing import Any

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "flywheel.settings")
django.setup()

from mcp.server.transport_security import TransportSecuritySettings  # noqa: E402

from agents.auth import BearerAuth, RequestCaller  # noqa: E402
from agents.server import build_server  # noqa: E402
from flywheel.hosts import HostCheck  # noqa: E402
from flywheel.readlimits import BodyLimits  # noqa: E402

PATH = "/mcp"

# Stateless mode ends a "session" with every request, and the SDK logs each end at INFO.
logging.getLogger("mcp.server.streamable_http").setLevel(logging.WARNING)


def build_app() -> Any:
    """The MCP server's Starlette app (stateless), behind the Host and Origin check (the
    REST API's own, flywheel.hosts: DNS-rebinding protection), the API-key check and the
    web's limits on a request's body (flywheel.readlimits)."""
    server = build_server(RequestCaller())
    mcp_app = server.streamable_http_app(
        streamable_http_path=PATH,
        stateless_http=True,
        # Plain JSON answers: no tool streams progress, and a JSON body costs less than
        # an SSE stream per call.
        json_response=True,
        # Hosts and origins are checked by HostCheck, as on every other door.
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
    )
    return BodyLimits(HostCheck(BearerAuth(mcp_app)))


application = build_app()

"""How uvicorn serves Flywheel: the options every command that starts it passes.

``manage.py serve`` (what `make run` starts) and ``manage.py runmcp --transport
streamable-http`` take them from here, so the server's behaviour is set in
settings like everything else, not by uvicorn's defaults.

Forwarded headers: uvicorn believes ``X-Forwarded-For`` and ``X-Forwarded-Proto``
from 127.0.0.1 unless told otherwise, so anything on the same host (or a proxy
there that passes a client's header along) could name any client address, and
the brake on failed authentication per address (flywheel.ratelimit) counted
every guess against a fresh one. They are believed only from the proxies
FLYWHEEL_TRUSTED_PROXIES names; with none named (the default) they are ignored.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings

APPLICATION = "flywheel.asgi:application"


def uvicorn_options() -> dict[str, Any]:
    """uvicorn.run's / uvicorn.Config's keyword arguments for Flywheel's settings."""
    trusted: list[str] = settings.TRUSTED_PROXIES
    return {
        "proxy_headers": bool(trusted),
        # Never None: uvicorn would read FORWARDED_ALLOW_IPS, or trust loopback.
        "forwarded_allow_ips": list(trusted),
    }

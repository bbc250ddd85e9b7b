"""Where a person opens Flywheel's pages, for the processes that print links to them.

The web app answers with links built from the request it serves (flywheel/rest.py).
A process that serves nothing — `manage.py ask` in another terminal, the MCP server
over stdio — has no request to ask: it takes FLYWHEEL_PUBLIC_URL, else the address
`manage.py serve` (what `make run` starts) last served from this directory, which it
notes in var/served-url, so `PORT=8001 make run` gives links on 8001.
"""

from __future__ import annotations

import contextlib

from django.conf import settings

SERVED_URL_FILE = "served-url"


def served_at(host: str, port: int) -> None:
    """Note where this directory's web app now serves (var/served-url)."""
    shown = "127.0.0.1" if host in {"0.0.0.0", "::", ""} else host  # noqa: S104 - a name
    shown = f"[{shown}]" if ":" in shown else shown
    with contextlib.suppress(OSError):  # a read-only var/: links stay relative
        (settings.VAR_DIR / SERVED_URL_FILE).write_text(f"http://{shown}:{port}\n")


def public_url() -> str:
    """Where a person opens Flywheel's pages, without a trailing slash:
    FLYWHEEL_PUBLIC_URL; else where `manage.py serve` last served from this directory
    (make run's address, whatever its PORT); else "" (links stay relative)."""
    if settings.PUBLIC_URL:
        return str(settings.PUBLIC_URL)
    try:
        served = (settings.VAR_DIR / SERVED_URL_FILE).read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError):
        return ""
    return served if served.startswith("http://") and len(served) < 300 else ""

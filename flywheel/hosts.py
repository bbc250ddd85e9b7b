"""Which hosts Flywheel answers to: the one check of the Host header, for every door.

Django's own rule (``request.get_host()`` against ALLOWED_HOSTS, forwarded
headers as the settings say), remembered per Host header (see
:func:`host_verdict`). The REST API answers a refusal in the error shape
(:func:`host_refusal`, before any view runs: flywheel/asgi.py and the fast
lane), the pages and static files with Django's 400 page, and the MCP
server over HTTP in the error shape too (:class:`HostCheck`, which also
holds an ``Origin`` header to the same hosts, against DNS rebinding).
"""

from __future__ import annotations

import io
import logging
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.core.exceptions import DisallowedHost
from django.core.handlers.asgi import ASGIRequest
from django.core.signals import setting_changed
from django.dispatch import receiver
from django.http import HttpRequest, JsonResponse
from django.http.request import split_domain_port, validate_host

from flywheel.errors import error_body

# Where Django itself reports a refused Host, so one logging rule covers both.
security_logger = logging.getLogger("django.security.DisallowedHost")

FOREIGN_HOST = "The Host header names a host this server does not serve."
FOREIGN_ORIGIN = "The Origin header names a site this server does not serve."


def host_refusal(request: HttpRequest) -> JsonResponse | None:
    """A 400 in the error shape if the request's Host is not in ALLOWED_HOSTS, else None.

    An accepted request's scheme and host are kept on it, where
    ``request.build_absolute_uri`` looks them up instead of checking again.
    """
    host, err = host_verdict(request)
    if err is None:
        request.__dict__["_current_scheme_host"] = f"{request.scheme}://{host}"
        return None
    security_logger.error(str(err), extra={"status_code": 400, "request": request})
    body = error_body("BadRequest", FOREIGN_HOST, {"host": request.META.get("HTTP_HOST", "")[:100]})
    return JsonResponse(body, status=400)


# Host headers (with what else get_host reads) and Django's verdict on them; a few
# clients send the same few values, so the check runs once per value, not per request.
_HOST_HEADERS = (
    "HTTP_X_FORWARDED_HOST",
    "HTTP_HOST",
    "SERVER_NAME",
    "SERVER_PORT",
    "HTTP_X_FORWARDED_PORT",  # read instead of SERVER_PORT with USE_X_FORWARDED_PORT
)
_MAX_REMEMBERED_HOSTS = 256
_verdicts: dict[tuple[str | None, ...], tuple[str, DisallowedHost | None]] = {}


def host_verdict(request: HttpRequest) -> tuple[str, DisallowedHost | None]:
    """The request's host and None, or "" and why it is refused (Django's rule)."""
    key = tuple(request.META.get(name) for name in _HOST_HEADERS)
    verdict = _verdicts.get(key)
    if verdict is None:
        try:
            verdict = (request.get_host(), None)
        except DisallowedHost as err:
            verdict = ("", err)
        if len(_verdicts) >= _MAX_REMEMBERED_HOSTS:
            _verdicts.clear()  # a client making up Host headers gains nothing
        _verdicts[key] = verdict
    return verdict


@receiver(setting_changed)
def _hosts_changed(setting: str, **kwargs: Any) -> None:
    if setting in {"ALLOWED_HOSTS", "USE_X_FORWARDED_HOST", "USE_X_FORWARDED_PORT", "DEBUG"}:
        _verdicts.clear()


def origin_allowed(origin: str) -> bool:
    """Whether a browser's ``Origin`` is a site on a host Flywheel serves (Django's rule
    for a Host, applied to the origin's); no Origin (not a browser) is allowed."""
    if not origin:
        return True
    parts = urlsplit(origin)
    domain, _ = split_domain_port(parts.netloc)
    allowed = settings.ALLOWED_HOSTS or (
        [".localhost", "127.0.0.1", "[::1]"] if settings.DEBUG else []
    )
    return parts.scheme in {"http", "https"} and bool(domain) and validate_host(domain, allowed)


class HostCheck:
    """ASGI middleware: an HTTP request with a Host (or an Origin) Flywheel does not
    serve is refused in the error shape (400, or 403 for the Origin) before ``app``."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            request = ASGIRequest(scope, io.BytesIO())
            refused = host_refusal(request)
            origin = request.META.get("HTTP_ORIGIN", "")
            if refused is None and not origin_allowed(origin):
                body = error_body("PermissionDenied", FOREIGN_ORIGIN, {"origin": origin[:100]})
                refused = JsonResponse(body, status=403)
            if refused is not None:
                await _send(refused, send)
                return
        await self.app(scope, receive, send)


async def _send(response: JsonResponse, send: Any) -> None:
    content = response.content
    headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(content))]
    await send({"type": "http.response.start", "status": response.status_code, "headers": headers})
    await send({"type": "http.response.body", "body": content})

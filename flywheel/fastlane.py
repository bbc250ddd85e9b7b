"""A fast lane for the query endpoints, beside Django's ASGI handler.

Django's handler gives every request a thread-sensitive context (a thread
started and joined per request) and sends the request signals through it;
at the query path's volumes that costs more than routing itself. The query
endpoints need none of it: they authenticate by key, reach the database only
through flywheel.asyncdb (which returns its connections), and are plain
async views. So their requests are read, turned into Django requests and
handed to the very same view functions, and the responses are sent back the
way Django sends them. Every other path goes through Django as usual.

Nothing on the way calls ``request.get_host()`` for certain (with
FLYWHEEL_PUBLIC_URL set, not even the trace URL), so :func:`host_refusal`
checks the Host up front, here and for every other API path (flywheel/asgi.py).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Coroutine
from typing import Any

from django.core.exceptions import DisallowedHost, RequestAborted, SuspiciousOperation
from django.core.handlers.asgi import ASGIHandler, ASGIRequest
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.http.response import HttpResponseBase

from flywheel.errors import error_body, internal_error_body

logger = logging.getLogger(__name__)
# Where Django itself reports a refused Host, so one logging rule covers both.
security_logger = logging.getLogger("django.security.DisallowedHost")

View = Callable[..., Coroutine[Any, Any, HttpResponseBase]]


def host_refusal(request: HttpRequest) -> JsonResponse | None:
    """A 400 in the error shape if the request's Host is not in ALLOWED_HOSTS, else None.

    Django's own rule (``request.get_host()``), answered as the API answers.
    """
    try:
        request.get_host()
    except DisallowedHost as err:
        security_logger.error(str(err), extra={"status_code": 400, "request": request})
        body = error_body(
            "BadRequest",
            "The Host header names a host this server does not serve.",
            {"host": request.META.get("HTTP_HOST", "")[:100]},
        )
        return JsonResponse(body, status=400)
    return None


class FastLane:
    """Serve ``routes`` (exact path -> async view) directly; pass the rest to ``fallback``."""

    def __init__(self, routes: dict[str, View], fallback: ASGIHandler) -> None:
        self.routes = routes
        self.fallback = fallback

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        view = self.routes.get(scope["path"]) if scope["type"] == "http" else None
        if view is None:
            await self.fallback(scope, receive, send)
            return
        try:
            body = await self.fallback.read_body(receive)
        except RequestAborted:
            return  # the client left before sending its question
        try:
            request = ASGIRequest(scope, body)
            response = host_refusal(request) or await view(request)
        except SuspiciousOperation as err:  # e.g. a body over DATA_UPLOAD_MAX_MEMORY_SIZE
            response = JsonResponse(error_body("BadRequest", str(err)), status=400)
        except Exception:
            logger.exception("Unhandled error on %s", scope["path"])
            response = JsonResponse(internal_error_body(), status=500)
        finally:
            body.close()
        if isinstance(response, HttpResponse) and not response.has_header("Content-Length"):
            # Said up front, the body goes out whole instead of chunk-encoded.
            response["Content-Length"] = str(len(response.content))
        await self.fallback.send_response(response, send)

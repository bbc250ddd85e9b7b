"""A fast lane for the query endpoints, beside Django's ASGI handler.

Django's handler gives every request a thread-sensitive context (a thread
started and joined per request) and sends the request signals through it;
at the query path's volumes that costs more than routing itself. The query
endpoints need none of it: they authenticate by key, reach the database only
through flywheel.asyncdb (which returns its connections), and are plain
async views. So their requests are read, turned into Django requests and
handed to the very same view functions, and the responses are sent back the
way Django sends them. Every other path goes through Django as usual.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Coroutine
from typing import Any

from django.core.exceptions import RequestAborted, SuspiciousOperation
from django.core.handlers.asgi import ASGIHandler, ASGIRequest
from django.http import HttpResponse, JsonResponse
from django.http.response import HttpResponseBase

from flywheel.errors import error_body, internal_error_body

logger = logging.getLogger(__name__)

View = Callable[..., Coroutine[Any, Any, HttpResponseBase]]


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
            response = await view(request)
        except SuspiciousOperation as err:  # e.g. a Host not in ALLOWED_HOSTS
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

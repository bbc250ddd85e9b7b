"""A fast lane for the query endpoints, beside Django's ASGI handler.

Django's handler gives every request a thread-sensitive context (a thread
started and joined per request) and sends the request signals through it;
at the query path's volumes that costs more than routing itself. The query
endpoints need none of it: they authenticate by key, reach the database only
through flywheel.asyncdb (which returns its connections), and are plain
async views. So their requests are read, turned into Django requests and
handed to the very same view functions, and the responses are sent back as
Django sends them (a plain one in two ASGI messages, without Django's
chunking loop). Every other path goes through Django as usual.

Nothing on the way calls ``request.get_host()`` for certain (with
FLYWHEEL_PUBLIC_URL set, not even the trace URL), so the Host is checked up
front (flywheel.hosts.host_refusal), here and for every other API path
(flywheel/asgi.py).
"""

from __future__ import annotations

import io
import logging
from collections.abc import Callable, Coroutine
from typing import Any

from django.conf import settings
from django.core.exceptions import RequestAborted, RequestDataTooBig, SuspiciousOperation
from django.core.handlers.asgi import ASGIHandler, ASGIRequest
from django.http import HttpResponse, JsonResponse
from django.http.response import HttpResponseBase

from flywheel.errors import error_body, internal_error_body
from flywheel.hosts import host_refusal

logger = logging.getLogger(__name__)

View = Callable[..., Coroutine[Any, Any, HttpResponseBase]]


async def read_body(receive: Any) -> bytes:
    """The request body, in memory: the fast lane's bodies are small JSON documents.

    Raises RequestAborted if the client leaves first, RequestDataTooBig (Django's
    check and words) past DATA_UPLOAD_MAX_MEMORY_SIZE, without reading the rest.
    """
    limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise RequestAborted()
        chunk = message.get("body", b"")
        if chunk:
            size += len(chunk)
            if limit is not None and size > limit:
                raise RequestDataTooBig(
                    "Request body exceeded settings.DATA_UPLOAD_MAX_MEMORY_SIZE."
                )
            chunks.append(chunk)
        if not message.get("more_body", False):
            return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def request_of(scope: dict[str, Any], body: bytes) -> ASGIRequest:
    """Django's request for ``scope``, its body already read (the size checked by
    read_body, so ``request.body`` is not read or checked again)."""
    request = ASGIRequest(scope, io.BytesIO(body))
    request._body = body  # what HttpRequest.body would have read from the stream
    return request


async def send_response(response: HttpResponseBase, send: Any, fallback: ASGIHandler) -> None:
    """Send ``response`` as Django's handler would; a plain one (no cookies, not
    streamed) goes out in two messages, its length said up front."""
    if response.streaming or response.cookies or not isinstance(response, HttpResponse):
        await fallback.send_response(response, send)
        return
    content = response.content
    if not response.has_header("Content-Length"):
        # Said up front, the body goes out whole instead of chunk-encoded.
        response["Content-Length"] = str(len(content))
    headers = [(name.encode("ascii"), value.encode("latin1")) for name, value in response.items()]
    await send({"type": "http.response.start", "status": response.status_code, "headers": headers})
    await send({"type": "http.response.body", "body": content})


class FastLane:
    """Serve ``routes`` (exact path -> async view) directly; pass the rest to ``fallback``."""

    def __init__(self, routes: dict[str, View], fallback: ASGIHandler) -> None:
        self.routes = routes
        self.fallback = fallback

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        view = self.view_for(scope)
        if view is None:
            await self.fallback(scope, receive, send)
            return
        await self.answer(view, scope, receive, send)

    def view_for(self, scope: dict[str, Any]) -> View | None:
        """The view of a fast-lane request; None for any other."""
        return self.routes.get(scope["path"]) if scope["type"] == "http" else None

    async def answer(self, view: View, scope: dict[str, Any], receive: Any, send: Any) -> int:
        """Serve one request with ``view``; the status sent (0: none, the client left)."""
        try:
            body = await read_body(receive)
            request = request_of(scope, body)
            response = host_refusal(request) or await view(request)
        except RequestAborted:
            return 0  # the client left before sending its question
        except SuspiciousOperation as err:  # e.g. a body over DATA_UPLOAD_MAX_MEMORY_SIZE
            response = JsonResponse(error_body("BadRequest", str(err)), status=400)
        except Exception:
            logger.exception("Unhandled error on %s", scope["path"])
            response = JsonResponse(internal_error_body(), status=500)
        await send_response(response, send, self.fallback)
        return response.status_code

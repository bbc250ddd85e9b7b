"""ASGI entry point: `uvicorn flywheel.asgi:application`, as ``manage.py serve`` starts it.

API requests (``/api/``) go to a Django handler without the browser
middleware (sessions, CSRF, messages, ...): API clients authenticate with a
key, and under ASGI every classic middleware hook costs a hop to a thread,
which at hundreds of requests in flight dominated the query path's cost.
The query endpoints themselves take a fast lane past Django's handler
(flywheel/fastlane.py). Everything else (admin, pages, static files) gets
the full stack. Every API path refuses a Host outside ALLOWED_HOSTS in the
error shape before anything else; pages refuse it with Django's own 400.
Every HTTP request's body is read within its size and time limits
(flywheel/readlimits.py) before either sees it.
"""

import gc
import os
from collections.abc import Mapping
from typing import IO, Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler
from django.core.asgi import get_asgi_application
from django.core.exceptions import SuspiciousOperation
from django.core.handlers.asgi import ASGIHandler, ASGIRequest
from django.core.handlers.exception import response_for_exception
from django.http import FileResponse, Http404, HttpRequest
from django.http.response import HttpResponseBase

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "flywheel.settings")

site = get_asgi_application()


class ApiHandler(ASGIHandler):
    """Django's ASGI handler with settings.API_MIDDLEWARE instead of settings.MIDDLEWARE,
    refusing a Host outside ALLOWED_HOSTS in the error shape before any view runs."""

    def create_request(
        self, scope: Mapping[str, Any], body_file: IO[bytes]
    ) -> tuple[ASGIRequest, None] | tuple[None, HttpResponseBase]:
        created = super().create_request(scope, body_file)
        request = created[0]
        refusal = host_refusal(request) if request is not None else None
        return created if refusal is None else (None, refusal)

    def load_middleware(self, is_async: bool = False) -> None:
        # load_middleware reads settings.MIDDLEWARE; this runs once, at start-up.
        full = settings.MIDDLEWARE
        settings.MIDDLEWARE = settings.API_MIDDLEWARE
        try:
            super().load_middleware(is_async)
        finally:
            settings.MIDDLEWARE = full


api = ApiHandler()

# Imported once Django is set up (get_asgi_application did that above).
from dialects import openai_api  # noqa: E402
from flywheel.fastlane import FastLane  # noqa: E402
from flywheel.hosts import host_refusal, host_verdict  # noqa: E402
from flywheel.metrics import REQUESTS, door_of, labelled  # noqa: E402
from flywheel.readlimits import BodyLimit, within_declared_limit  # noqa: E402
from routing import api as routing_api  # noqa: E402

api_with_fast_lane = FastLane(
    {
        "/api/v1/query": routing_api.query,
        "/api/v1/route": routing_api.route,
        "/v1/chat/completions": openai_api.chat_completions,
    },
    fallback=api,
)
# Paths served without the browser middleware: the REST API and the dialects' doors.
API_PREFIXES = ("/api/", "/v1/", "/compat/")


class StaticFilesHandler(ASGIStaticFilesHandler):
    """Django's static file server, answering as the pages do: a 404 for a path that
    leaves the static root (Django's own answers a plain-text 500), Django's 400 for
    a Host outside ALLOWED_HOSTS (it checks none)."""

    def serve(self, request: HttpRequest) -> FileResponse:
        try:
            return super().serve(request)
        except SuspiciousOperation as err:  # e.g. /static/..%2f..%2fetc%2fpasswd
            raise Http404("No such static file.") from err

    async def get_response_async(self, request: HttpRequest) -> HttpResponseBase:
        _, refused = host_verdict(request)
        if refused is not None:
            answer = sync_to_async(response_for_exception, thread_sensitive=False)
            return await answer(request, refused)
        return await super().get_response_async(request)


if settings.SERVE_STATIC:
    # The admin's CSS and JS, served by the app itself so that a single
    # process needs no web server in front; turn off behind a proxy that serves them.
    site = StaticFilesHandler(site)


def freeze_startup_objects() -> None:
    """Take what start-up built out of the garbage collector's sight.

    Modules, settings, URL patterns and compiled rules live as long as the
    process, yet every full collection walks them all. A burst of queries
    triggers full collections; measured in a 500-query burst, each took
    40-100 ms of CPU with start-up's objects in view and 15-25 ms without.
    """
    gc.collect()  # start-up's garbage goes first, so it is not frozen with the rest
    gc.freeze()


async def lifespan(receive: Any, send: Any) -> None:
    """At start-up, freeze start-up's objects and start the decision writer (which
    replays what a killed process left). At shutdown, the clean stop every server of
    Flywheel makes (serving_stop): nothing cut off mid-way, nothing left to replay."""
    from routing.answering.service import serving_stop
    from routing.recording.writer import writer_start

    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            freeze_startup_objects()
            writer_start()  # replays what a killed process left in the decision spool
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await serving_stop()
            await send({"type": "lifespan.shutdown.complete"})
            return


async def application(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] == "lifespan":  # Django's handler refuses lifespan; the server's own
        await lifespan(receive, send)
        return
    is_api = scope["type"] == "http" and scope["path"].startswith(API_PREFIXES)
    handler = api_with_fast_lane if is_api else site
    if scope["type"] != "http":
        await handler(scope, receive, send)
        return
    status = 0
    # flywheel/readlimits.py: the body size limit, watched unless the length is declared
    body = None if within_declared_limit(scope) else BodyLimit(scope, receive, send)
    if body is not None:
        receive, send = body.receive, body.send
    view = api_with_fast_lane.view_for(scope) if is_api else None
    if view is not None:  # the query path: its status is known without watching the sends
        try:
            if body is None or not await body.refuse_declared():
                status = await api_with_fast_lane.answer(view, scope, receive, send)
        finally:
            status = (body.refused if body else 0) or status
            labelled(REQUESTS, "rest", str(status) if status else "none").inc()
        return

    async def counted(message: Mapping[str, Any]) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = message["status"]
        await send(message)

    try:
        if body is None or not await body.refuse_declared():
            await handler(scope, receive, counted)
    finally:  # a client gone before the answer started counts as status "none"
        status = (body.refused if body else 0) or status
        labelled(REQUESTS, door_of(scope["path"]), str(status) if status else "none").inc()

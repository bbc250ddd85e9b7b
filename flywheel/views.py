"""Project-level endpoints: liveness, readiness, the caller's identity and the site icon."""

from __future__ import annotations

import hmac
from pathlib import Path

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.cache import cache_control, never_cache
from django.views.decorators.http import require_GET, require_safe
from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from flywheel.authentication import request_api_key
from flywheel.errors import error_body
from flywheel.metrics import exposition
from flywheel.readiness import readiness_report


@never_cache
@require_GET
def healthz(request: HttpRequest) -> JsonResponse:
    """Liveness: answers whenever the process can serve a request."""
    return JsonResponse({"status": "ok"})


LOOPBACK = {"127.0.0.1", "::1"}


@never_cache
@require_GET
def metrics(request: HttpRequest) -> HttpResponse:
    """Prometheus metrics (flywheel/metrics.py). With FLYWHEEL_METRICS_TOKEN set, only
    for ``Authorization: Bearer <token>``; without it, only from this machine: the
    counts name backends and intents of every tenant."""
    token = settings.METRICS_TOKEN
    if token:
        given = request.headers.get("Authorization", "").removeprefix("Bearer ").strip()
        allowed = hmac.compare_digest(given.encode(), token.encode())
    else:
        allowed = request.META.get("REMOTE_ADDR") in LOOPBACK
    if not allowed:
        body = error_body(
            "PermissionDenied",
            "Metrics are served to this machine, or with FLYWHEEL_METRICS_TOKEN as a bearer token.",
            {},
        )
        return JsonResponse(body, status=403)
    content, content_type = exposition()
    return HttpResponse(content, content_type=content_type)


# The pages link the static copy; this answers browsers and tools that ask for
# /favicon.ico without reading a page (every page of theirs was a 404 before).
FAVICON = (Path(__file__).parent / "static" / "flywheel" / "favicon.svg").read_bytes()


@cache_control(max_age=86400, public=True)
@require_safe
def favicon(request: HttpRequest) -> HttpResponse:
    """The site icon, an SVG, at the path browsers ask for."""
    return HttpResponse(FAVICON, content_type="image/svg+xml")


@never_cache
@require_GET
def readyz(request: HttpRequest) -> JsonResponse:
    """Readiness: 200 when database, cache and broker answer; 503 naming what is down."""
    report = readiness_report()
    down = sorted(name for name, state in report.items() if state != "ok")
    if not down:
        return JsonResponse({"status": "ready", "checks": report})
    body = error_body(
        "UnavailableError",
        f"Not ready: {', '.join(down)} down.",
        {"checks": report, "down": down},
    )
    return JsonResponse(body, status=503)


class WhoAmIView(APIView):
    """The tenant and key behind the request's API key."""

    @extend_schema(
        responses=inline_serializer(
            "WhoAmI",
            {
                "tenant": inline_serializer(
                    "WhoAmITenant",
                    {"slug": serializers.CharField(), "name": serializers.CharField()},
                ),
                "api_key": inline_serializer(
                    "WhoAmIKey",
                    {"name": serializers.CharField(), "prefix": serializers.CharField()},
                ),
            },
        )
    )
    def get(self, request: Request) -> Response:
        api_key = request_api_key(request)
        tenant = api_key.tenant
        return Response(
            {
                "tenant": {"slug": tenant.slug, "name": tenant.name},
                "api_key": {"name": api_key.name, "prefix": api_key.prefix},
            }
        )

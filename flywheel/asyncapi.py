"""A thin async door for the hot endpoints (the query path), beside DRF's sync views.

DRF views are synchronous, so a request that waits on a backend would hold a
worker thread for the whole wait. The query endpoints are plain async Django
views instead; this module gives them what DRF gives the others: API-key
authentication, per-key rate limits, JSON parsing and the one error shape.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Coroutine
from typing import Any

from django.http import HttpRequest, JsonResponse
from django.http.response import HttpResponseBase
from django.views.decorators.csrf import csrf_exempt

from flywheel.authentication import BEARER_RULE, api_key_of_async, bearer_key
from flywheel.errors import (
    DATABASE_UNAVAILABLE,
    ApplicationError,
    AuthenticationError,
    MethodNotAllowedError,
    RateLimitError,
    UnavailableError,
    UnsupportedMediaTypeError,
    database_unavailable,
)
from flywheel.jsonin import parse_json
from flywheel.models import ApiKey
from flywheel.ratelimit import api_key_admit

logger = logging.getLogger(__name__)

AsyncView = Callable[..., Coroutine[Any, Any, HttpResponseBase]]
# Called with (request, api_key, err) before a request over its limit is refused.
RateLimited = Callable[[HttpRequest, ApiKey, RateLimitError], None]


async def authenticate(request: HttpRequest, key_header: str | None = None) -> ApiKey:
    """The API key of ``Authorization: Bearer <key>`` (or, when a door names one, of its
    own header: ``key_header``), by the one path (flywheel.authentication); the key's
    rate limit is not applied here (async_api applies it, see admit).

    Raises AuthenticationError, or RateLimitError when the client's address has
    failed to authenticate too often (flywheel.ratelimit).
    """
    # request.META, not request.headers, which builds them all.
    raw_key = bearer_key(request.META.get("HTTP_AUTHORIZATION", ""))
    if raw_key is None and key_header is not None:
        raw_key = request.META.get("HTTP_" + key_header.upper().replace("-", "_"), "").strip()
    if not raw_key:
        raise AuthenticationError(BEARER_RULE)
    return await api_key_of_async(raw_key, meta=request.META)


def admit(request: HttpRequest, api_key: ApiKey, on_rate_limited: RateLimited | None) -> None:
    """Count the request against its key's limit.

    Raises RateLimitError, after calling ``on_rate_limited``. A key far from its
    limit is counted in this process, its counts sent in batches; otherwise the
    count is one blocking round trip to the shared cache, made on the event loop:
    measured by bench/ratelimit.py, 0.10 ms there against 0.21 ms through a
    worker thread.
    """
    try:
        api_key_admit(api_key=api_key)
    except RateLimitError as err:
        if on_rate_limited is not None:
            on_rate_limited(request, api_key, err)
        raise


def json_body(request: HttpRequest) -> Any:
    """The request's JSON body (flywheel/jsonin.py's contract).

    Raises UnsupportedMediaTypeError unless it is sent as application/json,
    ValidationError when it is not acceptable JSON.
    """
    media_type = request.content_type or ""
    if media_type != "application/json" and not media_type.endswith("+json"):
        raise UnsupportedMediaTypeError(
            "Send the request body as JSON (Content-Type: application/json).",
            details={"content_type": media_type[:100]},
        )
    return parse_json(request.body or b"null")


def error_response(err: ApplicationError) -> JsonResponse:
    response = JsonResponse(err.as_dict(), status=err.status_code)
    if isinstance(err, AuthenticationError):
        response["WWW-Authenticate"] = 'Bearer realm="api"'
    elif isinstance(err, RateLimitError):
        response["Retry-After"] = str(err.retry_after)
    elif isinstance(err, UnavailableError) and "retry_after" in err.details:
        response["Retry-After"] = str(err.details["retry_after"])
    return response


def async_api(
    *methods: str,
    on_rate_limited: RateLimited | None = None,
    error: Callable[[ApplicationError], JsonResponse] = error_response,
    key_header: str | None = None,
) -> Callable[[AsyncView], AsyncView]:
    """Wrap an async view ``view(request, api_key, **kwargs)``: method check, API key,
    rate limit, errors.

    ``on_rate_limited`` is called as ``(request, api_key, err)`` before a
    request over its key's limit is refused (the query door records it). ``error``
    answers an ApplicationError (a door in another API's dialect words it its way);
    ``key_header`` is a header that may carry the key instead (Langflow's x-api-key).
    """

    def decorate(view: AsyncView) -> AsyncView:
        @csrf_exempt  # API-key auth, no cookies: there is no session to forge
        @functools.wraps(view)
        async def wrapper(request: HttpRequest, **kwargs: Any) -> HttpResponseBase:
            if request.method not in methods:
                refused = error(MethodNotAllowedError(f"Method {request.method} not allowed."))
                refused["Allow"] = ", ".join(methods)
                return refused
            try:
                api_key = await authenticate(request, key_header)
                admit(request, api_key, on_rate_limited)
                return await view(request, api_key, **kwargs)
            except ApplicationError as err:
                return error(err)
            except DATABASE_UNAVAILABLE as err:
                logger.warning("Answered 503 on %s: the database fails (%s)", request.path, err)
                return error(database_unavailable())

        return wrapper

    return decorate

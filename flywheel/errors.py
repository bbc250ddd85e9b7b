"""The one error contract: ``{"error": {"type", "message", "details"}}``.

Services raise :class:`ApplicationError` subclasses. The REST exception
handler below (and, later, the MCP layer) turns them into the same shape, so
every door reports a failure the same way.
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.db import InterfaceError, OperationalError
from django.http import Http404, HttpRequest, JsonResponse
from pydantic import BaseModel
from rest_framework import exceptions as drf_exceptions
from rest_framework import status
from rest_framework.response import Response


class ErrorInfo(BaseModel):
    """What went wrong: its type (whose fault, by name), a message and details."""

    type: str
    message: str
    details: dict[str, Any]


class ErrorBody(BaseModel):
    """The one error shape, as every door answers a failure."""

    error: ErrorInfo


class ApplicationError(Exception):
    """Base of every error a service raises on purpose."""

    type = "ApplicationError"
    status_code: int = status.HTTP_500_INTERNAL_SERVER_ERROR

    def __init__(self, message: str, *, details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.details = details or {}

    def as_dict(self) -> dict[str, Any]:
        return error_body(self.type, self.message, self.details)


class ValidationError(ApplicationError):
    type = "ValidationError"
    status_code = status.HTTP_400_BAD_REQUEST


class AuthenticationError(ApplicationError):
    type = "AuthenticationError"
    status_code = status.HTTP_401_UNAUTHORIZED


class PermissionDeniedError(ApplicationError):
    type = "PermissionDenied"
    status_code = status.HTTP_403_FORBIDDEN


class NotFoundError(ApplicationError):
    type = "NotFoundError"
    status_code = status.HTTP_404_NOT_FOUND


class ExpiredError(ApplicationError):
    """What was asked for existed, and is gone for good (past the retention)."""

    type = "ExpiredError"
    status_code = status.HTTP_410_GONE


class MethodNotAllowedError(ApplicationError):
    type = "MethodNotAllowed"
    status_code = status.HTTP_405_METHOD_NOT_ALLOWED


class RequestTimeoutError(ApplicationError):
    """The client did not send its request (headers or body) in time."""

    type = "RequestTimeout"
    status_code = status.HTTP_408_REQUEST_TIMEOUT


class PayloadTooLargeError(ApplicationError):
    type = "PayloadTooLarge"
    status_code = status.HTTP_413_REQUEST_ENTITY_TOO_LARGE


class HeadersTooLargeError(ApplicationError):
    type = "HeadersTooLarge"
    status_code = status.HTTP_431_REQUEST_HEADER_FIELDS_TOO_LARGE


class ConflictError(ApplicationError):
    type = "ConflictError"
    status_code = status.HTTP_409_CONFLICT


class UnsupportedMediaTypeError(ApplicationError):
    type = "UnsupportedMediaType"
    status_code = status.HTTP_415_UNSUPPORTED_MEDIA_TYPE


class RateLimitError(ApplicationError):
    """Too many requests; ``retry_after`` (seconds) travels as the Retry-After header."""

    type = "RateLimitError"
    status_code = status.HTTP_429_TOO_MANY_REQUESTS

    def __init__(
        self, message: str, *, retry_after: int, details: dict[str, Any] | None = None
    ) -> None:
        super().__init__(message, details={"retry_after": retry_after, **(details or {})})
        self.retry_after = retry_after
        self.excess = 0  # how far over its limit the refused request is, where counted


class UnavailableError(ApplicationError):
    type = "UnavailableError"
    status_code = status.HTTP_503_SERVICE_UNAVAILABLE


# What the database driver raises while the database is down, restarting or out of
# connections: the client hears 503 and to retry, not that Flywheel has a bug.
DATABASE_UNAVAILABLE = (OperationalError, InterfaceError)
DATABASE_RETRY_SECONDS = 5


def database_unavailable() -> UnavailableError:
    return UnavailableError(
        f"The database is unavailable; try again in {DATABASE_RETRY_SECONDS} seconds.",
        details={"retry_after": DATABASE_RETRY_SECONDS},
    )


def error_body(type_: str, message: str, details: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"error": {"type": type_, "message": message, "details": details or {}}}


_DRF_TYPES: dict[type[drf_exceptions.APIException], str] = {
    drf_exceptions.ValidationError: ValidationError.type,
    drf_exceptions.ParseError: ValidationError.type,
    drf_exceptions.NotAuthenticated: AuthenticationError.type,
    drf_exceptions.AuthenticationFailed: AuthenticationError.type,
    drf_exceptions.PermissionDenied: PermissionDeniedError.type,
    drf_exceptions.NotFound: NotFoundError.type,
    drf_exceptions.MethodNotAllowed: "MethodNotAllowed",
    drf_exceptions.UnsupportedMediaType: "UnsupportedMediaType",
    drf_exceptions.Throttled: "RateLimitError",
}


def _drf_type(exc: drf_exceptions.APIException) -> str:
    for cls in type(exc).__mro__:
        if cls in _DRF_TYPES:
            return _DRF_TYPES[cls]
    return ApplicationError.type


def api_exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    """DRF exception handler: every API error leaves in the one error shape."""
    if isinstance(exc, ApplicationError):
        response = Response(exc.as_dict(), status=exc.status_code)
        if isinstance(exc, RateLimitError):
            response["Retry-After"] = str(exc.retry_after)
        elif isinstance(exc, UnavailableError) and "retry_after" in exc.details:
            response["Retry-After"] = str(exc.details["retry_after"])
        return response
    if isinstance(exc, DATABASE_UNAVAILABLE):
        return api_exception_handler(database_unavailable(), context)
    if isinstance(exc, Http404):
        exc = drf_exceptions.NotFound()
    elif isinstance(exc, DjangoPermissionDenied):
        exc = drf_exceptions.PermissionDenied()
    if not isinstance(exc, drf_exceptions.APIException):
        return None  # a bug: let Django log it and answer 500 (see server_error)

    if isinstance(exc, drf_exceptions.ValidationError):
        detail = exc.detail
        details: dict[str, Any] = (
            {"fields": detail} if isinstance(detail, dict) else {"errors": detail}
        )
        message = "The request is not valid."
    else:
        details = {}
        message = str(exc.detail)
    response = Response(error_body(_drf_type(exc), message, details), status=exc.status_code)
    wait = getattr(exc, "wait", None)  # set by DRF's Throttled
    if isinstance(exc, drf_exceptions.Throttled) and wait is not None:
        response["Retry-After"] = str(max(1, round(wait)))
    if isinstance(exc, drf_exceptions.NotAuthenticated | drf_exceptions.AuthenticationFailed):
        response["WWW-Authenticate"] = 'Bearer realm="api"'
    return response


def not_found(request: HttpRequest, exception: Exception | None = None) -> JsonResponse:
    """handler404 for API paths; other paths keep Django's HTML page."""
    return JsonResponse(
        error_body(NotFoundError.type, f"No such resource: {request.path}"), status=404
    )


def internal_error_body(details: dict[str, Any] | None = None) -> dict[str, Any]:
    """What a client hears of a bug: that it happened, never its details (those are logged)."""
    return error_body(
        "InternalError", "The server failed to answer; the error was logged.", details
    )


def server_error(request: HttpRequest) -> JsonResponse:
    return JsonResponse(internal_error_body(), status=500)

"""The typed errors a backend adapter raises (seed 003), mapped from real server behaviour.

Each carries the backend's name and, where there was one, the HTTP status;
its message is Flywheel's own account of the failure (and, at most, a
backend's short JSON error message, scrubbed of credentials: see
backends/http/client.py), never the body of a reply. They are application errors:
every door reports them in the one error shape.
"""

from __future__ import annotations

from typing import Any

from rest_framework import status

from flywheel.errors import ApplicationError, ValidationError


class BackendError(ApplicationError):
    """Base of every error that comes from talking to a backend."""

    type = "BackendError"
    status_code: int = status.HTTP_502_BAD_GATEWAY
    # Whether trying the same call again might succeed (used by fallback and retries).
    transient = False

    def __init__(
        self,
        message: str,
        *,
        backend: str = "",
        http_status: int | None = None,
        details: dict[str, Any] | None = None,
    ) -> None:
        merged = {"backend": backend, **(details or {})}
        if http_status is not None:
            merged["http_status"] = http_status
        super().__init__(message, details=merged)
        self.backend = backend
        self.http_status = http_status


class BackendConnectionError(BackendError):
    """The server could not be reached (refused, reset, DNS)."""

    type = "ConnectionError"
    status_code: int = status.HTTP_502_BAD_GATEWAY
    transient = True


class BackendTimeoutError(BackendConnectionError):
    """The server did not answer in time (connect, read or the whole call)."""

    type = "TimeoutError"
    status_code = status.HTTP_504_GATEWAY_TIMEOUT


class BackendAuthenticationError(BackendError):
    """The server refused Flywheel's credentials for this backend."""

    type = "AuthenticationError"
    status_code = status.HTTP_502_BAD_GATEWAY


class BackendValidationError(BackendError):
    """The server refused the request as invalid (bad id, bad flow data, bad input)."""

    type = "ValidationError"
    status_code = status.HTTP_400_BAD_REQUEST


class BackendNotFoundError(BackendError):
    """The flow (or route) does not exist on the server."""

    type = "NotFoundError"
    status_code = status.HTTP_404_NOT_FOUND


class BackendRateLimitError(BackendError):
    """The server asked Flywheel to slow down."""

    type = "RateLimitError"
    status_code = status.HTTP_429_TOO_MANY_REQUESTS
    transient = True


class BackendConfigurationError(BackendError):
    """Flywheel's own settings for the backend cannot be used (a key it cannot send).

    A backend error all the same, so routing moves on to the next candidate.
    """

    type = "ConfigurationError"
    status_code = status.HTTP_502_BAD_GATEWAY


class BackendUnexpectedError(BackendError):
    """Anything else: a 5xx without a recognisable cause, or an answer that makes no sense."""

    type = "UnexpectedError"
    status_code = status.HTTP_502_BAD_GATEWAY


class BackendUnsupportedError(ValidationError):
    """Something the backend's kind cannot do (Langflow has no deployment step).

    The adapter's interface raises it before any call to the server. The
    request is at fault, not the server: a ValidationError (400), and not a
    BackendError, so nothing takes it for a failing backend or tries another.
    """

    def __init__(self, *, label: str, kind: str, backend: str, operation: str) -> None:
        super().__init__(
            f"{label} backend {backend!r} does not support {operation}.",
            details={"backend": backend, "kind": kind, "operation": operation},
        )

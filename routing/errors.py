"""Errors of the routing service, in the one error shape."""

from __future__ import annotations

from rest_framework import status

from flywheel.errors import ApplicationError


class NoMatchingFlowError(ApplicationError):
    """No flow on any usable backend serves the intent, and there is no generic flow."""

    type = "NoMatchingFlow"
    status_code = status.HTTP_404_NOT_FOUND


class BackendUnavailableError(ApplicationError):
    """The backend asked for by name, kind or id cannot take questions now."""

    type = "BackendUnavailable"
    status_code = status.HTTP_503_SERVICE_UNAVAILABLE


class AllBackendsFailedError(ApplicationError):
    """Every candidate failed (details carry the chain) and no cached answer was fresh."""

    type = "AllBackendsFailed"
    status_code = status.HTTP_502_BAD_GATEWAY

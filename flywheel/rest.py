"""What the REST doors of every app share: absolute links, query parameters read by
their contract, strict integer ones, and limit/offset pages built on them."""

from __future__ import annotations

from typing import Any, TypeVar

from django.conf import settings
from django.http import HttpRequest
from rest_framework.pagination import LimitOffsetPagination
from rest_framework.request import Request

from flywheel.contract import QUERY_DIGITS, Contract, field_names, validated
from flywheel.errors import ValidationError

C = TypeVar("C", bound=Contract)


def absolute_url(request: HttpRequest, path: str) -> str:
    """``path`` (absolute, such as a trace page's) as a full URL: under FLYWHEEL_PUBLIC_URL
    when it is set, else under the scheme and host the request came in on."""
    base = settings.PUBLIC_URL or request.build_absolute_uri("/").rstrip("/")
    return f"{base}{path}"


def query_integer(request: Request, name: str, *, low: int, high: int, default: int) -> int:
    """The query parameter ``name`` as an integer from ``low`` to ``high`` (``default``
    when it is absent).

    Raises ValidationError naming the parameter for anything else: an empty value, a
    sign, non-ASCII digits, or a number out of range.
    """
    raw = request.query_params.get(name)
    if raw is None:
        return default
    if not QUERY_DIGITS.fullmatch(raw) or not low <= int(raw) <= high:
        rule = f"Must be an integer from {low} to {high}."
        raise ValidationError(
            f"The {name} parameter is not valid.", details={"fields": {name: rule}}
        )
    return int(raw)


def query_values(request: Request, contract: type[C]) -> C:
    """The query string as ``contract`` takes it: each parameter it declares, as sent
    (those left out take the contract's defaults).

    Raises ValidationError naming each bad parameter, in the contract's words.
    """
    params = request.query_params
    return validated(
        contract, {name: params[name] for name in field_names(contract) if name in params}
    )


class StrictLimitOffsetPagination(LimitOffsetPagination):
    """DRF's limit/offset pages, but a ``limit`` or ``offset`` that is not an integer in
    range is a 400 naming it (DRF's own silently falls back to its defaults).

    ``limit``: 1 to max_limit (default default_limit); ``offset``: 0 to max_offset.
    """

    default_limit: int = 50
    max_limit: int = 500
    max_offset = 2**31 - 1  # an int32, as the schema says; far past any real page

    def get_limit(self, request: Request) -> int:
        return query_integer(
            request, self.limit_query_param, low=1, high=self.max_limit, default=self.default_limit
        )

    def get_offset(self, request: Request) -> int:
        return query_integer(
            request, self.offset_query_param, low=0, high=self.max_offset, default=0
        )

    def get_schema_operation_parameters(self, view: Any) -> list[dict[str, Any]]:
        parameters = super().get_schema_operation_parameters(view)
        bounds = {
            self.limit_query_param: {"minimum": 1, "maximum": self.max_limit},
            self.offset_query_param: {"minimum": 0, "maximum": self.max_offset},
        }
        for parameter in parameters:
            parameter["schema"].update(format="int32", **bounds.get(parameter["name"], {}))
        return parameters

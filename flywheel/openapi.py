"""OpenAPI: what drf-spectacular cannot see, added by post-processing hooks.

drf-spectacular documents DRF views from their serializers, and a body a DRF
view takes as a contract (flywheel.contract) from the contract itself
(:class:`ContractScheme`); a DRF view's query parameters are drawn from
their contract by :func:`query_parameters`. The async views
(flywheel/asyncapi.py) are documented by their apps' hooks from their
contracts (routing/openapi.py, chatflows/openapi.py), each operation built
by :func:`operation`. Two hooks here (SPECTACULAR_SETTINGS) add the rest:
the path ids and empty filters the server takes, which no serializer states,
and, in one table by method and path, every error status each operation can
answer, in the one error shape (flywheel.errors.ErrorBody).
What remains here is not a request or response shape: it is where each
shape applies (paths, parameters, statuses and their meanings).
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from drf_spectacular.extensions import OpenApiAuthenticationExtension, OpenApiSerializerExtension
from drf_spectacular.utils import OpenApiParameter

from flywheel.contract import Contract
from flywheel.errors import ErrorBody
from flywheel.schemas import openapi_schema

ERROR = openapi_schema(ErrorBody)


def _json(schema: dict[str, Any]) -> dict[str, Any]:
    return {"content": {"application/json": {"schema": schema}}}


def query_parameters(contract: type[Contract], *names: str) -> list[OpenApiParameter]:
    """``contract``'s fields (those named, in that order, else all) as a DRF view's query
    parameters: each schema as the contract declares it, its description beside it, and
    required as the contract requires it (a parameter is never null: left out, it is
    the field's default)."""
    declared = openapi_schema(contract)
    required = set(declared.get("required", ()))
    parameters = []
    for name in names or tuple(declared["properties"]):
        schema = {k: v for k, v in declared["properties"][name].items() if k != "nullable"}
        if schema.get("default", 0) is None:
            del schema["default"]
        description = schema.pop("description", "")
        parameters.append(
            OpenApiParameter(name, schema, required=name in required, description=description)
        )
    return parameters


def operation(
    operation_id: str,
    summary: str,
    response: dict[str, Any],
    body: dict[str, Any] | None,
    *,
    tag: str = "query",
    status: int = 200,
) -> dict[str, Any]:
    """An API-key operation of an async view, answering JSON (``body``: its request's)."""
    built: dict[str, Any] = {
        "operationId": operation_id,
        "summary": summary,
        "tags": [tag],
        "security": [{"ApiKey": []}],
        "responses": {str(status): {"description": "OK", **_json(response)}},
    }
    if body is not None:
        built["requestBody"] = {"required": True, **_json(body)}
    return built


# --- constraints the server enforces that no serializer states --------------------

# Path parameters by name, wherever they appear: backend ids are ASCII digits (as many
# as a bigint holds, backends/api.py's lookup_value_regex), the others UUIDs.
PATH_PARAMETERS: dict[str, dict[str, Any]] = {
    "id": {"type": "integer", "minimum": 1, "maximum": 10**18 - 1},
    "session_id": {"type": "string", "format": "uuid"},
    "request_id": {"type": "string", "format": "uuid"},
}
# Filters the views read as ``params.get(name) or None``: an empty value is no filter.
EMPTY_IS_NO_FILTER = {
    ("get", "/api/v1/flows"): {"backend", "intent"},
    ("get", "/api/v1/decisions"): {"intent", "outcome", "backend", "session"},
    ("get", "/api/v1/analytics/backends-by-intent"): {"since", "until", "intent"},
    ("get", "/api/v1/analytics/timeseries"): {"since", "until", "intent", "backend"},
    ("get", "/api/v1/analytics/classification"): {"since", "until"},
    ("get", "/api/v1/analytics/splits"): {"since", "until", "intent"},
}


def add_constraints(
    result: dict[str, Any], generator: Any, request: Any, public: bool
) -> dict[str, Any]:
    """drf-spectacular post-processing hook: path ids and empty filters as the server
    checks them (views state their query parameters' own constraints)."""
    for path, operations in result.get("paths", {}).items():
        for method, operation in _operations(operations):
            filters = EMPTY_IS_NO_FILTER.get((method, path), set())
            for parameter in operation.get("parameters", []):
                schema = PATH_PARAMETERS.get(parameter["name"])
                if parameter["in"] == "path" and schema is not None:
                    parameter["schema"] = dict(schema)
                if parameter["in"] == "query" and parameter["name"] in filters:
                    parameter["allowEmptyValue"] = True
    return result


# --- every error each operation can answer --------------------------------------------

STATUSES = {
    400: "The request is not valid; the error names what is wrong.",
    401: "No API key, or a wrong or revoked one.",
    403: "The key's tenant may not do this (a shared backend is run by an administrator).",
    404: "Not found among what the key's tenant may see.",
    409: "The owner already has a backend of this name.",
    415: "The body is not sent as application/json.",
    429: "Too many requests: retry after Retry-After seconds.",
    502: "A backend failed or gave an answer that makes no sense.",
    503: "The backend asked for is unavailable (unhealthy or in cooldown).",
    504: "A backend did not answer in time.",
}
CHATFLOW = "/api/v1/chatflows/{chatflow_id}"
_SHARED = "The flow is on a shared backend: managed by an administrator."
_OTHER_TENANT = "tenant= names another tenant than the key's."
_BACKEND_CALL: dict[int, str | None] = {
    502: "The backend failed or refused Flywheel's credentials.",
    504: "The backend did not answer in time.",
}
# What the rules of _error_statuses cannot tell from the method and path, with what
# the status means there when the general wording does not say it.
EXTRA: dict[tuple[str, str], dict[int, str | None]] = {
    ("post", "/api/v1/query"): {
        400: "Not valid: a field, an unknown intent or backend, nothing to summarize.",
        404: "No flow serves the intent, or no such session.",
        502: "Every backend that could answer failed, and no cached answer is fresh.",
        503: None,
    },
    ("post", "/api/v1/route"): {
        400: "Not valid: a field, an unknown intent or backend.",
        404: "No such session.",
    },
    ("post", "/api/v1/query-router/route"): {404: "Query routing is off."},
    ("get", "/api/v1/query-router/patterns"): {404: "Query routing is off."},
    ("post", "/api/v1/backends"): {409: None},
    ("put", "/api/v1/backends/{id}"): {403: None, 409: None},
    ("patch", "/api/v1/backends/{id}"): {403: None, 409: None},
    ("delete", "/api/v1/backends/{id}"): {403: None},
    ("post", "/api/v1/backends/{id}/health-check"): {
        403: "Only the backend's owner (or staff) may probe it on demand.",
        429: "Too many requests, or too many probes of this backend: see Retry-After.",
        502: None,
        504: None,
    },
    ("post", "/api/v1/backends/{id}/discover"): {
        400: "The backend refused the discovery request.",
        404: "No such backend for this tenant, or no flow list at the backend's URL.",
        403: "Only the backend's owner (or staff) may discover its flows on demand.",
        429: "Too many requests, or too many discoveries of this backend: see Retry-After.",
        502: None,
        504: None,
    },
    ("get", "/api/v1/analytics/backends-by-intent"): {403: _OTHER_TENANT},
    ("get", "/api/v1/analytics/timeseries"): {403: _OTHER_TENANT},
    ("get", "/api/v1/analytics/classification"): {403: _OTHER_TENANT},
    ("get", "/api/v1/analytics/splits"): {403: _OTHER_TENANT},
    ("get", "/api/v1/visualize/{session_id}"): {404: "No such session for this tenant."},
    ("patch", "/api/v1/flows/{id}"): {
        400: "Not valid, or nothing to set.",
        403: "The flow is on a shared backend: its routing is set by an administrator.",
        404: "No such flow among the tenant's (or it was removed from its backend).",
    },
    ("get", "/api/v1/chatflows"): {404: "No such backend for this tenant (?backend=)."},
    ("post", "/api/v1/chatflows"): {
        403: "The backend is shared: flows there are managed by an administrator.",
        404: "No such backend for this tenant (?backend=).",
        **_BACKEND_CALL,
    },
    ("post", "/api/v1/chatflows/generate"): {
        400: "Not valid, no generator model configured, or the backend cannot generate.",
        404: "No such backend for this tenant (?backend=).",
        **_BACKEND_CALL,
    },
    ("get", CHATFLOW): {400: "Not a flow id.", **_BACKEND_CALL},
    ("put", CHATFLOW): {403: _SHARED, **_BACKEND_CALL},
    ("patch", CHATFLOW): {403: _SHARED, **_BACKEND_CALL},
    ("delete", CHATFLOW): {400: "Not a flow id.", 403: _SHARED, **_BACKEND_CALL},
    ("post", f"{CHATFLOW}/deploy"): {
        400: "Not valid, or the backend's kind has no deployment (Langflow).",
        403: _SHARED,
        **_BACKEND_CALL,
    },
    ("post", f"{CHATFLOW}/predict"): {
        400: "Not valid, or the chatflow is not deployed.",
        502: "The flow failed (and, with fallback, every other one did too).",
        503: None,
        504: None,
    },
}
HEADERS = {
    401: {"WWW-Authenticate": {"schema": {"type": "string"}}},
    429: {
        "Retry-After": {
            "schema": {"type": "integer", "minimum": 1},
            "description": "Seconds to wait (sent when Flywheel's own limit is reached).",
        }
    },
}
_METHODS = {"get", "put", "post", "delete", "patch", "head", "options", "trace"}


def _operations(operations: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    return [(method, op) for method, op in operations.items() if method in _METHODS]


def _error_statuses(method: str, path: str, operation: dict[str, Any]) -> dict[int, str]:
    """The error statuses an operation can answer, each with what it means there."""
    statuses: set[int] = set()
    if operation.get("security"):
        statuses |= {401, 429}  # every API-key door authenticates and is rate limited
    if "requestBody" in operation:
        statuses |= {400, 415}  # one strict JSON parser for every body
    parameters = operation.get("parameters", [])
    if any(parameter["in"] == "query" for parameter in parameters):
        statuses.add(400)
    if any(parameter["in"] == "path" for parameter in parameters):
        statuses.add(404)  # a detail route: not there, or not the tenant's
    extra = EXTRA.get((method, path), {})
    return {
        status: extra.get(status) or STATUSES[status] for status in sorted(statuses | set(extra))
    }


def add_error_responses(
    result: dict[str, Any], generator: Any, request: Any, public: bool
) -> dict[str, Any]:
    """drf-spectacular post-processing hook: every error status of every operation,
    in the one error shape (components/schemas/Error)."""
    components = result.setdefault("components", {})
    components.setdefault("schemas", {})["Error"] = ERROR
    components.setdefault("securitySchemes", {}).setdefault(
        "ApiKey", {"type": "http", "scheme": "bearer"}
    )
    for path, operations in result.get("paths", {}).items():
        for method, operation in _operations(operations):
            responses = operation.setdefault("responses", {})
            for status, description in _error_statuses(method, path, operation).items():
                response: dict[str, Any] = {
                    "description": description,
                    **_json({"$ref": "#/components/schemas/Error"}),
                }
                if status in HEADERS:
                    response["headers"] = HEADERS[status]
                responses.setdefault(str(status), response)
    return result


class ApiKeyScheme(OpenApiAuthenticationExtension):
    """Tell drf-spectacular how ApiKeyAuthentication authenticates: a bearer key."""

    target_class = "flywheel.authentication.ApiKeyAuthentication"
    name = "ApiKey"

    def get_security_definition(self, auto_schema: Any) -> dict[str, str]:
        return {"type": "http", "scheme": "bearer"}


class PageLoginScheme(OpenApiAuthenticationExtension):
    """Tell drf-spectacular how PageLoginAuthentication authenticates: the pages' login,
    Django's session cookie (the analytics CSV links and the visualisation JSON)."""

    target_class = "flywheel.authentication.PageLoginAuthentication"
    name = "PageLogin"

    def get_security_definition(self, auto_schema: Any) -> dict[str, str]:
        return {"type": "apiKey", "in": "cookie", "name": settings.SESSION_COOKIE_NAME}


class ContractScheme(OpenApiSerializerExtension):
    """Tell drf-spectacular what a DRF view's contract (flywheel.contract) reads: its
    schema as the contract declares it, a component under the contract's own name."""

    target_class = Contract
    match_subclasses = True
    priority = 1  # before drf-spectacular's own reading of any pydantic model

    def get_name(self, auto_schema: Any, direction: str) -> str:
        # drf-spectacular adds "Request" to a request body's component name, and "Patched"
        # to a PATCH body's (marking what it was given partial): a contract named after its
        # component is not named so twice.
        name: str = self.target.__name__
        if direction == "request":
            name = name.removesuffix("Request")
        if getattr(self.target, "partial", False):
            name = name.removeprefix("Patched")
        return name

    def map_serializer(self, auto_schema: Any, direction: str) -> dict[str, Any]:
        if direction == "request":
            return openapi_schema(self.target)
        return openapi_schema(self.target, mode="serialization")

"""The served OpenAPI schema: every error status per operation, the stream, the constraints."""

from __future__ import annotations

import re
import sys
from typing import Any

import pytest
from django.test import Client
from rest_framework.test import APIClient

pytestmark = pytest.mark.django_db

ERROR_REF = {"$ref": "#/components/schemas/Error"}
# The dialects' doors answer errors in their dialect's shape.
OPENAI_ERROR_REF = {"$ref": "#/components/schemas/OpenAIError"}
FLOWISE_ERROR_REF = {"$ref": "#/components/schemas/FlowiseError"}
DIALECT_ERRORS = {
    "/v1/": OPENAI_ERROR_REF,
    "/compat/flowise/": FLOWISE_ERROR_REF,
    "/compat/langflow/": {"$ref": "#/components/schemas/LangflowError"},
}
BACKEND = "/api/v1/backends/{id}"
CHATFLOW = "/api/v1/chatflows/{chatflow_id}"
# Every operation and each error status it can answer.
ERRORS = {
    ("get", "/api/v1/backends"): {401, 429},
    ("post", "/api/v1/backends"): {400, 401, 409, 415, 429},
    ("get", BACKEND): {401, 404, 429},
    ("put", BACKEND): {400, 401, 403, 404, 409, 415, 429},
    ("patch", BACKEND): {400, 401, 403, 404, 409, 415, 429},
    ("delete", BACKEND): {401, 403, 404, 429},
    ("post", f"{BACKEND}/health-check"): {401, 403, 404, 429, 502, 504},
    ("post", f"{BACKEND}/discover"): {400, 401, 403, 404, 429, 502, 504},
    ("get", "/api/v1/flows"): {400, 401, 429},
    ("patch", "/api/v1/flows/{id}"): {400, 401, 403, 404, 415, 429},
    ("get", "/api/v1/decisions"): {400, 401, 429},
    ("get", "/api/v1/decisions/{request_id}"): {401, 404, 429},
    ("get", "/api/v1/analytics/backends-by-intent"): {400, 401, 403, 429},
    ("get", "/api/v1/analytics/timeseries"): {400, 401, 403, 429},
    ("get", "/api/v1/analytics/classification"): {400, 401, 403, 429},
    ("get", "/api/v1/analytics/splits"): {400, 401, 403, 429},
    ("get", "/api/v1/visualize/{session_id}"): {401, 404, 429},
    ("get", "/api/v1/sessions"): {400, 401, 429},
    ("get", "/api/v1/sessions/{session_id}"): {401, 404, 429},
    ("get", "/api/v1/whoami"): {401, 429},
    ("post", "/api/v1/query"): {400, 401, 404, 415, 429, 502, 503},
    ("post", "/api/v1/route"): {400, 401, 404, 415, 429},
    ("post", "/api/v1/query-router/route"): {400, 401, 404, 415, 429},
    ("get", "/api/v1/query-router/patterns"): {401, 404, 429},
    ("get", "/api/v1/query-router/status"): {401, 429},
    ("get", "/api/v1/chatflows"): {400, 401, 404, 429},
    ("post", "/api/v1/chatflows"): {400, 401, 403, 404, 415, 429, 502, 504},
    ("post", "/api/v1/chatflows/generate"): {400, 401, 404, 415, 429, 502, 504},
    ("get", CHATFLOW): {400, 401, 404, 429, 502, 504},
    ("put", CHATFLOW): {400, 401, 403, 404, 415, 429, 502, 504},
    ("patch", CHATFLOW): {400, 401, 403, 404, 415, 429, 502, 504},
    ("delete", CHATFLOW): {400, 401, 403, 404, 429, 502, 504},
    ("post", f"{CHATFLOW}/deploy"): {400, 401, 403, 404, 415, 429, 502, 504},
    ("post", f"{CHATFLOW}/predict"): {400, 401, 404, 415, 429, 502, 503, 504},
    ("post", "/v1/chat/completions"): {400, 401, 404, 413, 415, 429, 502, 503},
    ("post", "/v1/responses"): {400, 401, 404, 413, 415, 429, 502, 503},
    ("get", "/v1/models"): {401, 429, 503},
    ("post", "/compat/flowise/api/v1/prediction/{flow}"): {400, 401, 404, 413, 415, 429, 502, 503},
    ("get", "/compat/flowise/api/v1/chatflows-streaming/{flow}"): {404},
    ("post", "/compat/langflow/api/v1/run/{flow}"): {400, 401, 404, 413, 415, 429, 502, 503},
}


@pytest.fixture(scope="module")
def schema() -> dict[str, Any]:
    response = Client().get("/api/v1/schema", {"format": "json"})
    assert response.status_code == 200
    return response.json()


def _operations(schema: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    return {
        (method, path): operation
        for path, item in schema["paths"].items()
        for method, operation in item.items()
    }


def _body(schema: dict[str, Any], method: str, path: str) -> dict[str, Any]:
    body = schema["paths"][path][method]["requestBody"]["content"]["application/json"]["schema"]
    if "$ref" in body:
        return schema["components"]["schemas"][body["$ref"].rsplit("/", 1)[1]]
    return body


def _parameter(schema: dict[str, Any], method: str, path: str, name: str) -> dict[str, Any]:
    parameters = schema["paths"][path][method]["parameters"]
    return next(p["schema"] for p in parameters if p["name"] == name)


def test_the_schema_lists_exactly_the_operations_the_table_covers(schema) -> None:
    assert set(_operations(schema)) == set(ERRORS)


@pytest.mark.parametrize(("method", "path"), sorted(ERRORS))
def test_each_operation_lists_every_error_it_can_answer(schema, method: str, path: str) -> None:
    responses = schema["paths"][path][method]["responses"]

    errors = {int(status) for status in responses if int(status) >= 400}

    assert errors == ERRORS[(method, path)]


def test_every_error_is_documented_in_the_error_shape(schema) -> None:
    for (method, path), operation in _operations(schema).items():
        for status, response in operation["responses"].items():
            if int(status) >= 400:
                content = response["content"]
                shape = next(
                    (ref for prefix, ref in DIALECT_ERRORS.items() if path.startswith(prefix)),
                    ERROR_REF,
                )
                assert content == {"application/json": {"schema": shape}}, (method, path)
    error = schema["components"]["schemas"]["Error"]
    assert error["properties"]["error"]["required"] == ["type", "message", "details"]


def test_too_many_requests_names_the_retry_after_header(schema) -> None:
    response = schema["paths"]["/api/v1/query"]["post"]["responses"]["429"]

    assert response["headers"]["Retry-After"]["schema"]["type"] == "integer"


def test_the_query_answer_may_come_as_an_event_stream(schema) -> None:
    content = schema["paths"]["/api/v1/query"]["post"]["responses"]["200"]["content"]

    assert set(content) == {"application/json", "text/event-stream"}
    event = content["text/event-stream"]["schema"]  # one event (OpenAPI 3.0: no itemSchema)
    assert event["required"] == ["event", "data"]
    assert event["properties"]["event"]["enum"] == ["chunk", "end", "error"]
    assert "event: end" in content["text/event-stream"]["example"]


def test_the_answers_method_lists_every_intent_method(schema) -> None:
    """The answer's model (routing/answering/query_output.py) takes them from the model."""
    from routing.models import IntentMethod

    answer = schema["paths"]["/api/v1/query"]["post"]["responses"]["200"]["content"]
    routing = answer["application/json"]["schema"]
    while "$ref" in routing:
        routing = schema["components"]["schemas"][routing["$ref"].rsplit("/", 1)[1]]
    method = routing["properties"]["routing"]["properties"]["method"]

    assert sorted(method["enum"]) == sorted(IntentMethod.values)


@pytest.mark.parametrize("path", ["/api/v1/query", "/api/v1/route"])
def test_the_query_body_states_the_constraints_the_server_enforces(schema, path: str) -> None:
    body = _body(schema, "post", path)
    fields = body["properties"]

    assert body["additionalProperties"] is False
    assert body["required"] == ["question"]
    assert (fields["question"]["minLength"], fields["question"]["maxLength"]) == (1, 10000)
    assert fields["intent"]["minLength"] == 1
    assert fields["intent"]["pattern"] == "^[-a-z0-9_]{1,50}$"
    assert fields["session_id"]["format"] == "uuid"
    parameters = fields["parameters"]["properties"]
    temperature = parameters["temperature"]
    assert (temperature["type"], temperature["minimum"], temperature["maximum"]) == ("number", 0, 2)
    assert (parameters["max_tokens"]["type"], parameters["max_tokens"]["minimum"]) == (
        "integer",
        1,
    )
    assert parameters["stream"]["type"] == "boolean"
    assert fields["include_routing_metadata"]["type"] == "boolean"


def test_not_blank_means_what_python_strips(schema) -> None:
    # The server strips with str.strip(); the schema's patterns must refuse exactly that.
    pattern = _body(schema, "post", "/api/v1/query")["properties"]["question"]["pattern"]
    spaces = [chr(c) for c in range(sys.maxunicode + 1) if chr(c).isspace()]

    assert not any(re.search(pattern, space * 3) for space in spaces)
    assert re.search(pattern, "\ufeff")  # ECMA's \s has it; Python does not strip it
    assert re.search(pattern, " a ")


def test_the_query_router_body_takes_only_a_query(schema) -> None:
    body = _body(schema, "post", "/api/v1/query-router/route")

    assert body["additionalProperties"] is False
    assert body["properties"]["query"]["maxLength"] == 10000


@pytest.mark.parametrize(
    ("method", "path"),
    [(m, p) for m, p in sorted(ERRORS) if p.startswith(BACKEND)],
)
def test_backend_ids_are_the_integers_the_route_takes(schema, method: str, path: str) -> None:
    assert _parameter(schema, method, path, "id") == {
        "type": "integer",
        "minimum": 1,
        "maximum": 10**18 - 1,  # 18 digits: backends/api.py's lookup_value_regex
    }


def test_a_flows_routing_is_patched_by_its_integer_id(schema) -> None:
    path = "/api/v1/flows/{id}"
    body = _body(schema, "patch", path)

    assert set(schema["paths"][path]) == {"patch"}
    assert _parameter(schema, "patch", path, "id")["type"] == "integer"
    assert body["additionalProperties"] is False
    assert set(body["properties"]) == {"scope", "is_generic", "intent_keywords"}
    assert "required" not in body
    response = schema["paths"][path]["patch"]["responses"]["200"]["content"]
    assert response["application/json"]["schema"] == {"$ref": "#/components/schemas/Flow"}
    assert "scope_edited" in schema["components"]["schemas"]["Flow"]["required"]


@pytest.mark.parametrize(
    ("path", "name"),
    [
        ("/api/v1/sessions/{session_id}", "session_id"),
        ("/api/v1/decisions/{request_id}", "request_id"),
    ],
)
def test_session_and_request_ids_are_uuids(schema, path: str, name: str) -> None:
    assert _parameter(schema, "get", path, name) == {"type": "string", "format": "uuid"}


def test_paging_takes_integers_in_range(schema) -> None:
    limit = _parameter(schema, "get", "/api/v1/decisions", "limit")
    offset = _parameter(schema, "get", "/api/v1/decisions", "offset")

    assert (limit["type"], limit["minimum"], limit["maximum"]) == ("integer", 1, 500)
    assert (offset["type"], offset["minimum"]) == ("integer", 0)


@pytest.mark.parametrize(
    ("path", "names"),
    [
        ("/api/v1/flows", {"backend", "intent"}),
        ("/api/v1/decisions", {"intent", "outcome", "backend", "session"}),
        ("/api/v1/analytics/splits", {"since", "until", "intent"}),
    ],
)
def test_an_empty_filter_is_documented_as_no_filter(schema, path: str, names: set[str]) -> None:
    parameters = schema["paths"][path]["get"]["parameters"]

    empty = {p["name"] for p in parameters if p.get("allowEmptyValue")}

    assert empty == names
    assert _parameter(schema, "get", "/api/v1/decisions", "session")["format"] == "uuid"


@pytest.mark.parametrize("component", ["BackendRequest", "PatchedBackendRequest"])
def test_backend_bodies_state_what_the_server_refuses(schema, component: str) -> None:
    body = schema["components"]["schemas"][component]
    fields = body["properties"]

    assert body["additionalProperties"] is False
    assert fields["base_url"]["pattern"] == r"^[Hh][Tt][Tt][Pp][Ss]?://[^/?#@\s]+([/?#]\S*)?$"
    assert (fields["timeout_seconds"]["minimum"], fields["timeout_seconds"]["maximum"]) == (
        0.1,
        600,
    )
    assert "id" not in fields  # read-only fields are not part of a request
    # One pattern for the key: blank, or printable ASCII inside what the server trims.
    # (A oneOf of "pattern" and "blank" made a key of whitespace valid for neither.)
    api_key = fields["api_key"]
    assert "oneOf" not in api_key
    for taken in ["", "\t", " sk-abc ", "\u3000sk-abc"]:
        assert re.fullmatch(api_key["pattern"].encode().decode("unicode_escape"), taken)
    for refused in ["sk\nabc", "sk\u00e9"]:
        assert not re.fullmatch(api_key["pattern"].encode().decode("unicode_escape"), refused)


# The schema and the server agree: what the schema refuses, the server refuses too.
# The query doors are async and read the key on a thread of their own: they need the
# key committed (transaction=True, a flush per test), so the bodies share one test.
REFUSED_BODIES = [
    {"question": "hi", "intent": ""},
    {"question": "hi", "intent": "Not A Slug"},
    {"question": "hi", "session_id": "not-a-uuid"},
    {"question": "hi", "parameters": {"temperature": 2.5}},
    {"question": "hi", "parameters": {"max_tokens": 0}},
    {"question": "hi", "parameters": {"max_tokens": 1.5}},
    {"question": "hi", "parameters": {"stream": "yes"}},
    {"question": "hi", "unknown": 1},
    {"question": "x" * 10001},
    {"question": "   "},
    {},
]


@pytest.mark.django_db(transaction=True)
def test_the_server_refuses_the_bodies_the_schema_refuses(api_client: APIClient) -> None:
    for body in REFUSED_BODIES:
        response = api_client.post("/api/v1/route", body, format="json")

        assert response.status_code == 400, (body, response.content)
        assert response.json()["error"]["type"] == "ValidationError"
    not_json = api_client.post("/api/v1/query", "question=hi", content_type="text/plain")
    assert not_json.status_code == 415
    assert not_json.json()["error"]["type"] == "UnsupportedMediaType"


@pytest.mark.parametrize(
    "path", ["/api/v1/analytics/backends-by-intent", "/api/v1/analytics/timeseries"]
)
def test_the_analytics_parameters_state_their_constraints(schema, path: str) -> None:
    assert _parameter(schema, "get", path, "since")["format"] == "date-time"
    assert _parameter(schema, "get", path, "until")["format"] == "date-time"
    assert _parameter(schema, "get", path, "intent")["pattern"] == "^[-a-z0-9_]{1,50}$"
    assert set(_parameter(schema, "get", path, "format")["enum"]) == {"json", "csv"}
    content = schema["paths"][path]["get"]["responses"]["200"]["content"]
    assert set(content) == {"application/json", "text/csv"}

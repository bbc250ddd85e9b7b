"""A backend's settings as a tenant's key sends them, declared once.

The REST doors (backends/api.py) validate a body with these contracts
(:func:`backend_fields`), and the OpenAPI schema shows them as declared
(flywheel/openapi.py publishes the contract a DRF view takes), so the two
cannot disagree. The checks are the model's own (backends/models.py,
backends/addresses.py), called from here; the admin and the commands, staff's
doors, are held to the same rules by the model when the services save.

A refusal reads as the DRF serializer these replace worded it: each bad field
with its message in a list (as the services' own refusals of a backend give
them), a field the body does not take as "Unknown field.", a value of the
wrong JSON type as "Must be ...". Names, URLs and API keys are trimmed; their
lengths count what was sent.
"""

from __future__ import annotations

from typing import Annotated, Any

from django.core.exceptions import ValidationError as DjangoValidationError
from django.core.validators import URLValidator
from pydantic import AfterValidator, BeforeValidator, ConfigDict, Field

from backends.adapters import kinds
from backends.addresses import validate_backend_url
from backends.models import (
    API_KEY_CHARACTERS,
    DEFAULT_TIMEOUT_SECONDS,
    DEFAULT_WEIGHT,
    MAX_API_KEY,
    MAX_NAME,
    MAX_TIMEOUT_SECONDS,
    MAX_URL,
    MAX_WEIGHT,
    MIN_TIMEOUT_SECONDS,
    validate_api_key,
)
from flywheel.contract import NOT_BLANK, PY_SPACE, Contract, Says, partial, refuse, validated
from flywheel.errors import ValidationError

REQUIRED = "This field is required."
NULL = "This field may not be null."
BLANK = "This field may not be blank."
NOT_A_URL = "Enter a valid URL."
DOUBLE: dict[str, Any] = {"format": "double"}  # as the answers' numbers are published
# What a URL the checks below take looks like, for the schema (and held by pydantic too,
# after them): http or https, a host without user-info, then a path, query or fragment.
URL = r"^[Hh][Tt][Tt][Pp][Ss]?://[^/?#@\s]+([/?#]\S*)?$"


def _says(message: str, **by_type: str) -> Says:
    """A field's words: ``message`` for a value of the wrong type, DRF's for a missing one."""
    return Says(message, by_type={"missing": REQUIRED, **by_type})


def _not_null(value: Any) -> Any:
    if value is None:
        raise refuse(NULL)
    return value


# Last in every field (so that it runs first): a null is refused as such, not as a value
# of the wrong type.
NOT_NULL = BeforeValidator(_not_null)


def _at_most(length: int) -> str:
    return f"Ensure this field has no more than {length} characters."


def _registered_kind(kind: str) -> str:
    if kind not in kinds():
        raise refuse(f'"{kind}" is not a valid choice.')
    return kind


def registered_kinds(schema: dict[str, Any]) -> None:
    """A kind's schema: one the adapter registry holds when the schema is drawn (a kind
    added at run time shows too)."""
    schema["enum"] = list(kinds())


def _checked_url(value: Any) -> Any:
    """A URL as sent, trimmed once its length is checked, or refused in the words of the
    model's checks (Django's URL check, then where a backend may point)."""
    if not isinstance(value, str):
        return value  # refused as not a string
    if len(value) > MAX_URL:  # as sent, as the schema's maxLength counts
        raise refuse(_at_most(MAX_URL))
    url = value.strip()
    if not url:
        raise refuse(BLANK)
    for check in (validate_backend_url, URLValidator()):
        try:
            check(url)
        except DjangoValidationError as err:
            raise refuse(err.messages[0]) from err
    return url


BackendName = Annotated[
    str,
    Field(min_length=1, max_length=MAX_NAME, pattern=NOT_BLANK),
    AfterValidator(str.strip),
    _says(
        "Must be a string.",
        string_too_long=_at_most(MAX_NAME),
        string_too_short=BLANK,
        string_pattern_mismatch=BLANK,
    ),
    NOT_NULL,
]
BackendKind = Annotated[
    str,
    AfterValidator(_registered_kind),
    Field(json_schema_extra=registered_kinds),
    _says("Must be a string."),
]
BackendURL = Annotated[
    str,
    Field(min_length=1, max_length=MAX_URL, pattern=URL, json_schema_extra={"format": "uri"}),
    BeforeValidator(_checked_url),
    _says(
        "Must be a string.", string_too_long=_at_most(MAX_URL), string_pattern_mismatch=NOT_A_URL
    ),
    NOT_NULL,
]
# As sent: printable ASCII inside the whitespace that is trimmed (it travels in a header).
BackendApiKey = Annotated[
    str,
    Field(
        max_length=MAX_API_KEY,
        pattern=f"^[{PY_SPACE}]*[{API_KEY_CHARACTERS}]*[{PY_SPACE}]*$",
        json_schema_extra={"writeOnly": True},
    ),
    AfterValidator(str.strip),
    _says(
        "Must be a string.",
        string_too_long=_at_most(MAX_API_KEY),
        string_pattern_mismatch=str(validate_api_key.message),
    ),
    NOT_NULL,
]
Enabled = Annotated[bool, _says("Must be true or false."), NOT_NULL]
TimeoutSeconds = Annotated[
    float,
    Field(
        ge=MIN_TIMEOUT_SECONDS,
        le=MAX_TIMEOUT_SECONDS,
        allow_inf_nan=False,
        json_schema_extra=DOUBLE,
    ),
    _says(
        "Must be a number.",
        greater_than_equal=f"Ensure this value is greater than or equal to {MIN_TIMEOUT_SECONDS}.",
        less_than_equal=f"Ensure this value is less than or equal to {MAX_TIMEOUT_SECONDS}.",
        finite_number="A valid number is required.",
    ),
    NOT_NULL,
]
Weight = Annotated[
    float,
    Field(ge=0, le=MAX_WEIGHT, allow_inf_nan=False, json_schema_extra=DOUBLE),
    _says(
        "Must be a number.",
        greater_than_equal="Ensure this value is greater than or equal to 0.",
        less_than_equal=f"Ensure this value is less than or equal to {MAX_WEIGHT}.",
        finite_number="A valid number is required.",
    ),
]


def _left_out_is_kept(schema: dict[str, Any]) -> None:
    # A setting left out is not changed (a new backend takes the model's default), so no
    # default is published: a PUT does not reset what it leaves out.
    for field in schema.get("properties", {}).values():
        field.pop("default", None)


class BackendRequest(Contract):
    """One of the caller's own backends: registered (POST), or its settings replaced
    (PUT: a setting left out keeps its value). The API key can be written, never read."""

    model_config = ConfigDict(json_schema_extra=_left_out_is_kept)

    name: BackendName
    kind: BackendKind
    base_url: BackendURL
    api_key: BackendApiKey = ""
    enabled: Enabled = True
    timeout_seconds: TimeoutSeconds = DEFAULT_TIMEOUT_SECONDS
    weight: Weight = DEFAULT_WEIGHT


PatchedBackendRequest = partial(
    BackendRequest,
    "PatchedBackendRequest",
    doc="A change to one of the caller's own backends: only the settings it names.",
)


def backend_fields(contract: type[BackendRequest], data: Any) -> dict[str, Any]:
    """The settings ``data`` sends, as ``contract`` takes them (only those sent).

    Raises ValidationError naming each bad field, its message in a list.
    """
    try:
        body = validated(contract, data)
    except ValidationError as err:
        fields = err.details.get("fields")
        if not fields:
            raise
        listed = {name: [message] for name, message in fields.items()}
        raise ValidationError(err.message, details={**err.details, "fields": listed}) from err
    return body.model_dump(exclude_unset=True)

"""Contracts: one declaration for validation and both schemas, refusals in Flywheel's words."""

from __future__ import annotations

from typing import Annotated, Any

import pytest
from pydantic import AfterValidator, Field

from flywheel.contract import (
    Contract,
    NullIs,
    Says,
    checked,
    partial,
    pick,
    refuse,
    validated,
    validated_filters,
)
from flywheel.errors import ValidationError
from flywheel.schemas import mcp_schema, openapi_schema


def _no_x(value: str) -> str:
    if "x" in value:
        raise refuse("No x, please.")
    return value


class Order(Contract):
    """An order."""

    refused_message = "The order is not valid."
    unknown_fields = "unknown_fields"

    item: Annotated[
        str,
        Field(min_length=1, max_length=5),
        AfterValidator(_no_x),
        Says("Name an item.", by_type={"string_too_long": "At most 5 characters."}),
    ]
    note: Annotated[str | None, Says("Must be text.")] = None
    size: Annotated[int, NullIs(1), Says("Must be a whole number.")] = 1


class Each(Contract):
    query: Annotated[str, Says("Required.")]


def _refusal(model: Any, data: Any) -> ValidationError:
    with pytest.raises(ValidationError) as refused:
        validated(model, data)
    return refused.value


@pytest.mark.parametrize(
    ("data", "fields"),
    [
        ({}, {"item": "Name an item."}),
        ({"item": 5}, {"item": "Name an item."}),
        ({"item": "toolong"}, {"item": "At most 5 characters."}),
        ({"item": "cup", "size": "2"}, {"size": "Must be a whole number."}),  # strict: no coercion
        ({"item": "xx"}, {"item": "No x, please."}),  # a validator's own words
        ({"item": "cup", "b": 1, "a": 2}, {"unknown_fields": "a, b"}),
    ],
)
def test_a_refusal_names_each_field_in_the_contracts_words(data: Any, fields: Any) -> None:
    refused = _refusal(Order, data)

    assert refused.message == "The order is not valid."
    assert refused.details == {"fields": fields}


def test_unknown_fields_come_first_and_each_by_name_unless_joined() -> None:
    assert list(_refusal(Order, {"z": 1}).details["fields"]) == ["unknown_fields", "item"]
    assert _refusal(Each, {"query": "q", "tenant": 1}).details["fields"] == {
        "tenant": "Unknown field."
    }


Size = Annotated[
    int,
    Field(ge=1, le=9),
    Says(
        "Pick 1 to 9.",
        constraint="range",
        by_type={"int_type": Says("A number.", constraint="type")},
    ),
]


def _odd(value: int) -> int:
    if value % 2 == 0:
        raise refuse("Pick an odd size.", "odd", shown="(even)")
    return value


OddSize = Annotated[Size, AfterValidator(_odd)]


@pytest.mark.parametrize(
    ("value", "message", "constraint", "shown"),
    [
        (12, "Pick 1 to 9.", "range", 12),
        ("3", "A number.", "type", "3"),  # strict: no coercion, and another error type's words
        (4, "Pick an odd size.", "odd", "(even)"),  # a validator's own rule, value and words
    ],
)
def test_a_field_naming_its_constraint_names_the_fault(
    value: Any, message: str, constraint: str, shown: Any
) -> None:
    with pytest.raises(ValidationError) as refused:
        checked(OddSize, value, "size")

    assert refused.value.message == message
    assert refused.value.details == {
        "field": "size",
        "value": shown,
        "constraint": constraint,
        "fields": {"size": message},
    }
    assert checked(OddSize, 5, "size") == 5


@pytest.mark.parametrize("data", [[], "order", None, 3])
def test_a_body_that_is_not_an_object_is_said_so(data: Any) -> None:
    refused = _refusal(Order, data)

    assert (refused.message, refused.details) == ("The request body must be a JSON object.", {})


def test_a_name_that_is_not_text_is_unknown_and_the_rest_is_still_checked() -> None:
    refused = _refusal(Order, {"bad \ud800": 1, "item": ""})

    assert refused.details["fields"] == {"unknown_fields": "bad \ud800", "item": "Name an item."}


def test_null_stands_for_the_default_where_the_contract_says_so() -> None:
    assert validated(Order, {"item": "cup", "size": None}).size == 1


def test_openapi_says_nullable_where_mcp_says_the_type() -> None:
    openapi = openapi_schema(Order)["properties"]
    mcp = mcp_schema(Order)["properties"]

    assert openapi["note"] == {"default": None, "nullable": True, "type": "string"}
    assert openapi["size"] == {"default": 1, "nullable": True, "type": "integer"}
    assert mcp["size"]["type"] == "integer"
    assert "nullable" not in mcp["size"]
    assert mcp["note"]["anyOf"] == [{"type": "string"}, {"type": "null"}]


def test_a_picked_contract_keeps_its_fields_and_words() -> None:
    part = pick(Order, "Part", "item", doc="Part of an order.")

    refused = _refusal(part, {"item": "", "size": 2})

    assert refused.message == "The order is not valid."
    assert refused.details["fields"] == {"unknown_fields": "size", "item": "Name an item."}
    assert openapi_schema(part)["description"] == "Part of an order."


def test_a_partial_contract_takes_any_of_its_fields_as_declared() -> None:
    change = partial(Order, "OrderChange", doc="A change to an order.")

    assert validated(change, {}).model_dump(exclude_unset=True) == {}
    assert validated(change, {"size": 2}).model_dump(exclude_unset=True) == {"size": 2}
    refused = _refusal(change, {"item": "toolong", "colour": "red"})
    assert refused.message == "The order is not valid."
    assert refused.details["fields"] == {
        "unknown_fields": "colour",
        "item": "At most 5 characters.",
    }
    assert "required" not in openapi_schema(change)
    assert openapi_schema(change)["description"] == "A change to an order."


class Filters(Contract):
    refused_message = "The filters are not valid."
    one_refused = "The {field} filter is not valid."

    colour: Annotated[str | None, Field(max_length=5), Says("At most 5 letters.")] = None
    size: Annotated[int | None, Says("Must be a whole number.")] = None


def test_a_refusal_of_one_field_may_name_it_and_an_empty_filter_is_none() -> None:
    one = _refusal(Filters, {"colour": "crimson"})
    both = _refusal(Filters, {"colour": "crimson", "size": "L"})

    assert one.message == "The colour filter is not valid."
    assert both.message == "The filters are not valid."
    assert list(both.details["fields"]) == ["colour", "size"]
    assert validated_filters(Filters, colour="", size=None) == Filters()
    assert validated_filters(Filters, colour="red").colour == "red"

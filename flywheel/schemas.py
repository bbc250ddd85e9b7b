"""The schemas drawn from a contract (flywheel/contract.py): the OpenAPI 3.0 schema of
the REST doors and the JSON Schema of the MCP tools, each inline, from the same model
the doors validate with, so the three cannot disagree.
"""

from __future__ import annotations

import typing
from typing import Any

from pydantic import TypeAdapter
from pydantic.json_schema import GenerateJsonSchema, JsonSchemaMode, JsonSchemaValue
from pydantic_core import core_schema

from flywheel.contract import NULL_IS_DEFAULT


class _OpenApi30(GenerateJsonSchema):
    """JSON Schema as OpenAPI 3.0 spells it: ``nullable`` instead of a null type."""

    def nullable_schema(self, schema: core_schema.NullableSchema) -> JsonSchemaValue:
        # Beside a $ref too: openapi_schema() inlines what it names, keeping the sibling.
        return {**self.generate_inner(schema["schema"]), "nullable": True}

    def literal_schema(self, schema: core_schema.LiteralSchema) -> JsonSchemaValue:
        spelled = super().literal_schema(schema)
        if "const" in spelled:
            spelled["enum"] = [spelled.pop("const")]
        return spelled

    def field_title_should_be_set(self, schema: Any) -> bool:
        return False


def openapi_schema(shape: Any, *, mode: JsonSchemaMode = "validation") -> dict[str, Any]:
    """``shape`` (a model or any type pydantic knows) as an OpenAPI 3.0 schema, inline."""
    generated = TypeAdapter(shape).json_schema(mode=mode, schema_generator=_OpenApi30)
    return _walk(_inline(generated), _as_openapi)


def mcp_schema(shape: Any) -> dict[str, Any]:
    """``shape`` as an MCP tool's JSON Schema (draft 2020-12), inline."""
    return _walk(_inline(TypeAdapter(shape).json_schema()), _as_mcp)


def _inline(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` with every ``$ref`` into its ``$defs`` replaced by what it names
    (contracts nest without cycles), so each operation reads whole where it stands."""
    definitions = schema.pop("$defs", {})

    def resolved(part: dict[str, Any]) -> dict[str, Any]:
        ref = part.get("$ref", "")
        if not ref.startswith("#/$defs/"):
            return part
        siblings = {k: v for k, v in part.items() if k != "$ref"}
        return _walk(definitions[ref.removeprefix("#/$defs/")], resolved) | siblings

    return _walk(schema, resolved)


def _as_openapi(part: dict[str, Any]) -> dict[str, Any]:
    part = {k: v for k, v in part.items() if k != "title"}
    if part.pop(NULL_IS_DEFAULT, False):
        part["nullable"] = True
    return part


def _as_mcp(part: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in part.items() if k != NULL_IS_DEFAULT}


_SUBSCHEMA = ("items", "additionalProperties", "not")
_SUBSCHEMAS = ("anyOf", "oneOf", "allOf", "prefixItems")


def _walk(
    schema: dict[str, Any], change: typing.Callable[[dict[str, Any]], dict[str, Any]]
) -> dict[str, Any]:
    """``schema`` with ``change`` applied to it and to each schema inside it."""
    part = dict(change(schema))
    if isinstance(part.get("properties"), dict):
        part["properties"] = {k: _walk(v, change) for k, v in part["properties"].items()}
    for key in _SUBSCHEMA:
        if isinstance(part.get(key), dict):
            part[key] = _walk(part[key], change)
    for key in _SUBSCHEMAS:
        if isinstance(part.get(key), list):
            part[key] = [_walk(branch, change) for branch in part[key]]
    return part

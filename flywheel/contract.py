"""Request and response shapes, each declared once as a pydantic model.

A contract is a pydantic model. The doors validate with it (:func:`validated`),
the OpenAPI schema shows it (:func:`openapi_schema`) and so do the MCP tools'
schemas (:func:`mcp_schema`), so the three cannot disagree.

A refusal reads in Flywheel's words, not pydantic's: :func:`refusal` is the one
place that turns pydantic's errors into the error shape's ValidationError. A
field says how a refusal of it reads with :class:`Says` (its message, and other
words for some of pydantic's error types); a validator of Flywheel's own raises
:func:`refuse` with its message. ``details.fields`` maps each refused field
(``parameters.temperature`` inside an object) to its message; fields the
contract does not take are named as the contract says (:class:`Contract`).
"""

from __future__ import annotations

import functools
import re
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeVar

from pydantic import BaseModel, BeforeValidator, ConfigDict, TypeAdapter, create_model
from pydantic import ValidationError as PydanticError
from pydantic.fields import FieldInfo
from pydantic.json_schema import GenerateJsonSchema, JsonSchemaMode, JsonSchemaValue
from pydantic_core import PydanticCustomError, core_schema
from typing_extensions import is_typeddict

from flywheel.errors import ValidationError
from flywheel.jsonin import string_problem

# What Python's str.strip() removes (str.isspace()), spelled for ECMA and Python regexes
# alike: the server strips before it checks, and ECMA's \s differs (it has U+FEFF, not U+0085).
PY_SPACE = (
    r"\u0009-\u000d\u001c-\u0020\u0085\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000"
)
# A string with something besides whitespace.
NOT_BLANK = f"[^{PY_SPACE}]"

# A whole number as a query string spells it: ASCII digits, no more than ten (int() would
# also take "\u0663", " 5" and "+5").
QUERY_DIGITS = re.compile(r"[0-9]{1,10}")

NOT_AN_OBJECT = "The request body must be a JSON object."
_REFUSED = "refused"  # the error type of refuse(): the message is Flywheel's already
_UNKNOWN = {"extra_forbidden", "invalid_key"}  # a field the contract does not take
_NOT_AN_OBJECT = {"model_type", "model_attributes_type", "dict_type"}


class Contract(BaseModel):
    """A request's shape: strict JSON types (no coercion), no field it does not declare.

    ``refused_message`` heads a refusal; ``one_refused``, when set, heads one that
    names a single field (``{field}`` is its name). A field it does not take is
    listed under ``details.fields[unknown_fields]`` (names joined) when that is
    set, else each under its own name as "Unknown field.".
    """

    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)

    refused_message: ClassVar[str] = "The request is not valid."
    one_refused: ClassVar[str | None] = None
    unknown_fields: ClassVar[str | None] = None


@dataclass(frozen=True)
class Says:
    """Field metadata: how a refusal of the field reads, whatever pydantic found wrong
    with it; ``by_type`` gives other words for some of pydantic's error types."""

    message: str
    by_type: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class NullIs:
    """Field metadata: JSON null stands for ``value`` (the field's default).

    Published as nullable in the OpenAPI schema; the MCP schemas show only the
    type itself (null is taken there too).
    """

    value: Any

    def __get_pydantic_core_schema__(self, source: Any, handler: Any) -> core_schema.CoreSchema:
        value = self.value

        def default_for_null(given: Any) -> Any:
            return (value.copy() if hasattr(value, "copy") else value) if given is None else given

        return core_schema.no_info_before_validator_function(default_for_null, handler(source))

    def __get_pydantic_json_schema__(self, schema: Any, handler: Any) -> JsonSchemaValue:
        return {**handler(schema), _NULL_IS_DEFAULT: True}


_NULL_IS_DEFAULT = "x-null-is-default"  # set by NullIs, read by the renderers below


def _from_digits(value: Any) -> Any:
    return int(value) if isinstance(value, str) and QUERY_DIGITS.fullmatch(value) else value


# Field metadata, after the field's own Field(): an integer may come as the digits a query
# string spells it with (any other text is refused as not an integer).
FROM_DIGITS = BeforeValidator(_from_digits)


def refuse(message: str) -> PydanticCustomError:
    """The error a validator raises to refuse a value in Flywheel's own words."""
    return PydanticCustomError(_REFUSED, message)


C = TypeVar("C", bound=BaseModel)


@functools.cache
def field_names(shape: Any) -> tuple[str, ...]:
    """The fields a contract (a model, or a TypedDict of fields that may be left out)
    takes, in its order."""
    return tuple(TypeAdapter(shape).json_schema()["properties"])


@functools.cache
def required_names(shape: Any) -> tuple[str, ...]:
    """The fields a contract requires, in its order (as its schema says: a TypedDict's
    ``Required`` is read right under postponed annotations too)."""
    return tuple(TypeAdapter(shape).json_schema().get("required", ()))


def pick(model: type[Contract], name: str, *fields: str, doc: str) -> type[Contract]:
    """The contract ``name`` of some of ``model``'s fields, each as ``model`` declares it
    (a door that takes part of a request); ``doc`` describes it in the schemas."""
    picked = create_model(  # type: ignore[call-overload]
        name,
        __base__=Contract,
        __doc__=doc,
        __module__=model.__module__,
        **{
            field: (model.model_fields[field].annotation, model.model_fields[field])
            for field in fields
        },
    )
    picked.refused_message = model.refused_message
    picked.one_refused = model.one_refused
    picked.unknown_fields = model.unknown_fields
    return picked


def partial(model: type[C], name: str, *, doc: str) -> type[C]:
    """The contract ``name`` of all ``model``'s fields, each as ``model`` declares it but
    none required (a change names only what it changes: read it with
    ``model_dump(exclude_unset=True)``); ``doc`` describes it in the schemas."""
    return create_model(  # type: ignore[call-overload]
        name,
        __base__=model,
        __doc__=doc,
        __module__=model.__module__,
        **{
            field: (info.annotation, FieldInfo.merge_field_infos(info, default=None))
            for field, info in model.model_fields.items()
        },
    )


def validated(model: type[C], data: Any) -> C:
    """``data`` as ``model``. Raises ValidationError as :func:`refusal` words it."""
    try:
        return model.model_validate(data)
    except PydanticError as err:
        raise refusal(model, err, data) from err


def validated_filters(model: type[C], **filters: Any) -> C:
    """``filters`` as ``model`` takes them, each left empty (None or "") left out: an
    empty filter is no filter. Raises ValidationError as :func:`refusal` words it."""
    return validated(model, {k: v for k, v in filters.items() if v is not None and v != ""})


def refusal(model: type[BaseModel], err: PydanticError, data: Any = None) -> ValidationError:
    """pydantic's errors for ``model`` as Flywheel's ValidationError (the module's rules);
    ``data``, what was validated, names the fields pydantic could not read."""
    problems = err.errors(include_url=False, include_input=False)
    unreadable: list[str] = []
    if isinstance(data, dict) and any(
        not p["loc"] and p["type"] not in _NOT_AN_OBJECT for p in problems
    ):
        # A name that is not text (a lone surrogate) stops pydantic before any field:
        # such names are unknown fields, and the others are checked without them.
        readable = {k: v for k, v in data.items() if isinstance(k, str) and not string_problem(k)}
        unreadable = [str(name) for name in data if name not in readable]
        try:
            model.model_validate(readable)
            problems = []
        except PydanticError as again:
            problems = again.errors(include_url=False, include_input=False)
    rules = _rules(model)
    fields: dict[str, str] = {}
    unknown: list[str] = []
    for problem in problems:
        loc, kind = problem["loc"], problem["type"]
        if not loc and kind in _NOT_AN_OBJECT:
            return ValidationError(NOT_AN_OBJECT)
        if len(loc) == 1 and kind in _UNKNOWN:
            unknown.append(str(loc[0]))
            continue
        path, says = _rule_for(rules, loc)
        if kind == _REFUSED or says is None:
            message = problem["msg"]
        else:
            message = says.by_type.get(kind, says.message)
        fields.setdefault(path, message)
    if isinstance(data, dict) and unreadable:
        order = {str(name): i for i, name in enumerate(data)}
        unknown = sorted(unknown + unreadable, key=lambda name: order.get(name, 0))
    named = {**_unknown(model, unknown), **fields}
    message = getattr(model, "refused_message", Contract.refused_message)
    one = getattr(model, "one_refused", None)
    if one is not None and len(named) == 1:
        message = one.format(field=next(iter(named)))
    return ValidationError(message, details={"fields": named})


def _unknown(model: type[BaseModel], names: list[str]) -> dict[str, str]:
    if not names:
        return {}
    joined = getattr(model, "unknown_fields", None)
    if joined is None:
        return dict.fromkeys(names, "Unknown field.")
    return {joined: ", ".join(sorted({name[:50] for name in names}))}


def _rule_for(rules: Mapping[str, Says], loc: tuple[Any, ...]) -> tuple[str, Says | None]:
    """The deepest declared field ``loc`` lies in, and what it says."""
    parts = [str(part) for part in loc]
    for end in range(len(parts), 0, -1):
        path = ".".join(parts[:end])
        if path in rules:
            return path, rules[path]
    return ".".join(parts) or "body", None


@functools.cache
def _rules(model: type[BaseModel]) -> dict[str, Says]:
    """What each field says, by dotted path (an object field's own fields included)."""
    rules: dict[str, Says] = {}
    for name, info in model.model_fields.items():
        key = info.alias or name
        says = next((m for m in info.metadata if isinstance(m, Says)), None)
        if says is not None:
            rules[key] = says
        inner = info.annotation
        if is_typeddict(inner):
            for sub, hint in typing.get_type_hints(inner, include_extras=True).items():
                metadata = getattr(hint, "__metadata__", ())
                sub_says = next((m for m in metadata if isinstance(m, Says)), None)
                if sub_says is not None:
                    rules[f"{key}.{sub}"] = sub_says
    return rules


# --- the schemas drawn from a contract ---------------------------------------------------


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
    if part.pop(_NULL_IS_DEFAULT, False):
        part["nullable"] = True
    return part


def _as_mcp(part: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in part.items() if k != _NULL_IS_DEFAULT}


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

"""Request and response shapes, each declared once as a pydantic model.

A contract is a pydantic model. The doors validate with it (:func:`validated`),
the OpenAPI schema shows it and so do the MCP tools' schemas (flywheel/schemas.py
draws both from it), so the three cannot disagree.

A refusal reads in Flywheel's words, not pydantic's: :func:`refusal` is the one
place that turns pydantic's errors into the error shape's ValidationError. A
field says how a refusal of it reads with :class:`Says` (its message, and other
words for some of pydantic's error types); a validator of Flywheel's own raises
:func:`refuse` with its message. ``details.fields`` maps each refused field
(``parameters.temperature`` inside an object) to its message; fields the
contract does not take are named as the contract says (:class:`Contract`).
A field that names its constraint (seed 003's refusals) also names the first
fault in ``details``: its ``field``, its ``constraint`` and (shortly) its
``value``. :func:`checked` validates one value as its field's type.
"""

from __future__ import annotations

import dataclasses
import functools
import re
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeVar

from pydantic import BaseModel, BeforeValidator, ConfigDict, TypeAdapter, create_model
from pydantic import ValidationError as PydanticError
from pydantic.fields import FieldInfo
from pydantic.json_schema import JsonSchemaValue
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
_AS_GIVEN: Any = object()  # a refusal shows the value as given (shortly)


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


@dataclass(frozen=True, eq=False)  # hashed by identity: a type annotated with it is hashed
class Says:
    """Field metadata: how a refusal of the field reads, whatever pydantic found wrong
    with it; ``by_type`` gives other words (or another Says) for some of pydantic's
    error types. ``constraint`` names the rule broken (seed 003's ``details``), and
    ``shown`` stands for the value there when the value itself is not worth echoing."""

    message: str
    by_type: Mapping[str, str | Says] = field(default_factory=dict)
    constraint: str | None = None
    shown: Any = _AS_GIVEN

    def for_type(self, kind: str) -> Says:
        """What a refusal of pydantic's error type ``kind`` says."""
        other = self.by_type.get(kind)
        if other is None:
            return self
        if isinstance(other, str):
            return dataclasses.replace(self, message=other, by_type={})
        return other


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
        return {**handler(schema), NULL_IS_DEFAULT: True}


NULL_IS_DEFAULT = "x-null-is-default"  # set by NullIs, read by the renderers below


def _from_digits(value: Any) -> Any:
    return int(value) if isinstance(value, str) and QUERY_DIGITS.fullmatch(value) else value


# Field metadata, after the field's own Field(): an integer may come as the digits a query
# string spells it with (any other text is refused as not an integer).
FROM_DIGITS = BeforeValidator(_from_digits)


def refuse(
    message: str, constraint: str | None = None, shown: Any = _AS_GIVEN
) -> PydanticCustomError:
    """The error a validator raises to refuse a value in Flywheel's own words (naming
    the rule broken and what to show for the value, as :class:`Says` does)."""
    context: dict[str, Any] = {}
    if constraint is not None:
        context["constraint"] = constraint
    if shown is not _AS_GIVEN:
        context["shown"] = shown
    return PydanticCustomError(_REFUSED, message, context or None)


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


def refusal(
    model: Any, err: PydanticError, data: Any = None, *, message: str | None = None
) -> ValidationError:
    """pydantic's errors for ``model`` as Flywheel's ValidationError (the module's rules);
    ``data``, what was validated, names the fields pydantic could not read. ``message``
    heads it instead of the contract's own ``refused_message``."""
    problems = err.errors(include_url=False)
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
            problems = again.errors(include_url=False)
    rules = _rules(model)
    fields: dict[str, str] = {}
    unknown: list[str] = []
    fault: dict[str, Any] = {}
    for problem in problems:
        loc, kind = problem["loc"], problem["type"]
        if not loc and kind in _NOT_AN_OBJECT:
            return ValidationError(NOT_AN_OBJECT)
        if len(loc) == 1 and kind in _UNKNOWN:
            unknown.append(str(loc[0]))
            continue
        path, says = _rule_for(rules, loc)
        said = _said(problem, says)
        fields.setdefault(path, said.message)
        if not fault and said.constraint is not None:
            fault = _fault(path, said, problem.get("input"))
    if isinstance(data, dict) and unreadable:
        order = {str(name): i for i, name in enumerate(data)}
        unknown = sorted(unknown + unreadable, key=lambda name: order.get(name, 0))
    named = {**_unknown(model, unknown), **fields}
    headline = message or str(getattr(model, "refused_message", Contract.refused_message))
    one = getattr(model, "one_refused", None)
    if message is None and one is not None and len(named) == 1:
        headline = one.format(field=next(iter(named)))
    return ValidationError(headline, details={**fault, "fields": named})


def _unknown(model: type[BaseModel], names: list[str]) -> dict[str, str]:
    if not names:
        return {}
    joined = getattr(model, "unknown_fields", None)
    if joined is None:
        return dict.fromkeys(names, "Unknown field.")
    return {joined: ", ".join(sorted({name[:50] for name in names}))}


def _says(metadata: typing.Iterable[Any]) -> Says | None:
    return next((m for m in metadata if isinstance(m, Says)), None)


def _says_in_optional(annotation: Any) -> Says | None:
    """What ``X | None`` says, when ``X`` is a type annotated with a Says."""
    members = typing.get_args(annotation) if typing.get_origin(annotation) in _UNIONS else ()
    if type(None) not in members:
        return None
    return next((s for m in members if (s := _says(getattr(m, "__metadata__", ())))), None)


_UNIONS = (typing.Union, types.UnionType)


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
        says = _says(info.metadata) or _says_in_optional(info.annotation)
        if says is not None:
            rules[key] = says
        inner = info.annotation
        if is_typeddict(inner):
            for sub, hint in typing.get_type_hints(inner, include_extras=True).items():
                sub_says = _says(getattr(hint, "__metadata__", ()))
                if sub_says is not None:
                    rules[f"{key}.{sub}"] = sub_says
    return rules


def _said(problem: Mapping[str, Any], says: Says | None) -> Says:
    """What refusing ``problem`` says: the field's words, or the validator's own."""
    kind, context = problem["type"], problem.get("ctx") or {}
    if kind == _REFUSED:
        return Says(
            problem["msg"],
            constraint=context.get("constraint", says.constraint if says else None),
            shown=context.get("shown", _AS_GIVEN),
        )
    if says is None:
        return Says(problem["msg"])
    return says.for_type(kind)


def _fault(path: str, said: Says, value: Any) -> dict[str, Any]:
    shown = value if said.shown is _AS_GIVEN else said.shown
    return fault_details(path, shown, said.constraint)


def fault_details(field_name: str, value: Any, constraint: str | None) -> dict[str, Any]:
    """Seed 003's ``details``: the field, the constraint and (shortly) the value; text
    that JSON could not carry (a lone surrogate) or should not (a NUL) is not shown."""
    if isinstance(value, str):
        value = None if string_problem(value) else value[:80]
    elif not (isinstance(value, bool | int | float) or value is None):
        value = str(value)[:80]
    return {"field": field_name, "value": value, "constraint": constraint}


def checked(shape: Any, value: Any, field_name: str) -> Any:
    """``value`` as ``shape`` (a field's type, strictly), refused as the field
    ``field_name``, headed by what it broke."""
    model = _one_field(shape, field_name)
    try:
        return getattr(model.model_validate({field_name: value}), field_name)
    except PydanticError as err:
        refused = refusal(model, err)
        message = refused.details["fields"].get(field_name, refused.message)
        raise ValidationError(message, details=refused.details) from err


_ONE_FIELD: dict[tuple[int, str], tuple[Any, type[BaseModel]]] = {}


def _one_field(shape: Any, field_name: str) -> type[BaseModel]:
    """A model of the one field ``field_name`` of type ``shape``, made once (keyed by
    identity: an annotated type holding a Says is not hashable)."""
    key = (id(shape), field_name)
    if key not in _ONE_FIELD:
        model = create_model(  # type: ignore[call-overload]
            "Checked", __config__=ConfigDict(strict=True), **{field_name: (shape, ...)}
        )
        _ONE_FIELD[key] = (shape, model)  # the shape is kept, so its id stays its own
    return _ONE_FIELD[key][1]

"""The pydantic model of what a DRF serializer answers, so that a shape a DRF door
declares (and drf-spectacular documents) is not declared again for another door.

The MCP tools answer what the REST doors answer; where the REST door's shape is a
DRF serializer, :func:`model_of` gives the tool's output model from it: each
field the serializer writes out, typed as it says (a method field as
``extend_schema_field`` declares it, a nested serializer as its own model,
``allow_null`` as optional), its ``help_text`` as the description.
"""

from __future__ import annotations

import functools
from typing import Annotated, Any, Literal

from drf_spectacular.drainage import get_override
from pydantic import BaseModel, Field, WithJsonSchema, create_model
from rest_framework import serializers

_FORMATS = {serializers.DateTimeField: "date-time", serializers.UUIDField: "uuid"}
_PLAIN: tuple[tuple[type[serializers.Field], type], ...] = (
    (serializers.BooleanField, bool),
    (serializers.IntegerField, int),
    (serializers.FloatField, float),
    (serializers.CharField, str),
)


@functools.cache
def model_of(serializer: type[serializers.Serializer]) -> type[BaseModel]:
    """The model of ``serializer``'s output, named after it (without "Serializer")."""
    return _model(serializer())


def _model(instance: serializers.Serializer) -> type[BaseModel]:
    cls = type(instance)
    fields: dict[str, Any] = {
        name: (_annotation(field), Field(description=str(field.help_text or "") or None))
        for name, field in instance.fields.items()
        if not field.write_only
    }
    return create_model(cls.__name__.removesuffix("Serializer"), __doc__=cls.__doc__, **fields)


def _annotation(field: serializers.Field) -> Any:
    kind = _kind(field)
    return kind | None if getattr(field, "allow_null", False) else kind


def _kind(field: serializers.Field) -> Any:
    if isinstance(field, serializers.SerializerMethodField):
        declared = get_override(getattr(field.parent, field.method_name), "field")
        if isinstance(declared, serializers.Field):
            return _annotation(declared)
        return Annotated[Any, WithJsonSchema(declared)] if isinstance(declared, dict) else Any
    if isinstance(field, serializers.ListSerializer):
        return list[_kind(field.child)] if field.child is not None else list[Any]  # type: ignore[misc]
    if isinstance(field, serializers.Serializer):
        return model_of(type(field))
    if isinstance(field, serializers.ListField):
        return list[_annotation(field.child)]  # type: ignore[misc]
    if isinstance(field, serializers.ChoiceField):
        return Literal[tuple(field.choices)]
    for drf, spelled in _FORMATS.items():
        if isinstance(field, drf):
            return Annotated[str, Field(json_schema_extra={"format": spelled})]
    for drf, plain in _PLAIN:
        if isinstance(field, drf):
            return plain
    return Any

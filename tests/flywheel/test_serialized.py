"""A DRF serializer's output as a pydantic model: one declaration for both doors."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema_field
from pydantic import TypeAdapter
from rest_framework import serializers

from flywheel.serialized import model_of


class Inner(serializers.Serializer):
    ok = serializers.BooleanField()


class Outer(serializers.Serializer):
    """Something shown."""

    id = serializers.UUIDField(help_text="Its id.")
    at = serializers.DateTimeField(allow_null=True)
    tags = serializers.ListField(child=serializers.CharField())
    kind = serializers.ChoiceField(choices=[("a", "A"), ("b", "B")])
    secret = serializers.CharField(write_only=True)
    inner = serializers.SerializerMethodField()
    parts = Inner(many=True)

    @extend_schema_field(Inner(allow_null=True))
    def get_inner(self, obj: Any) -> Any:
        return None


def test_the_model_says_what_the_serializer_writes_out() -> None:
    schema = model_of(Outer).model_json_schema()
    fields = schema["properties"]

    assert schema["description"] == "Something shown."
    assert set(fields) == {"id", "at", "tags", "kind", "inner", "parts"}  # never write-only
    assert (fields["id"]["format"], fields["id"]["description"]) == ("uuid", "Its id.")
    assert fields["at"]["anyOf"][1] == {"type": "null"}
    assert fields["kind"]["enum"] == ["a", "b"]
    assert fields["tags"]["items"] == {"type": "string"}
    assert set(schema["required"]) == set(fields)


def test_the_model_takes_what_the_serializer_gives() -> None:
    given = {
        "id": "7c4e3a2b-1111-4222-8333-444455556666",
        "at": None,
        "tags": ["x"],
        "kind": "a",
        "inner": None,
        "parts": [{"ok": True}],
    }

    TypeAdapter(model_of(Outer)).validate_python(given)

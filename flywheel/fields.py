"""Model fields the apps share."""

from __future__ import annotations

import math
from typing import Any

from django.db import models
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.backends.signals import connection_created
from django.dispatch import receiver
from psycopg.types.string import TextLoader

from flywheel.jsonout import dumps


class CompactJSONField(models.JSONField):
    """JSON kept as its compact text: PostgreSQL's ``json`` type rather than ``jsonb``.

    For columns written once per question and read whole (a decision's candidates,
    fallback chain and evidence): jsonb spends about 12 bytes on each number and a
    header on each element, so a candidate of nine numbers took 120 bytes where its
    text takes 49 (docs/benchmarks.md, "Storage per question"). What jsonb has and
    json lacks is an index and the ``?`` and ``@>`` operators: filter by
    ``KT("column__key")`` (``->>``) instead of ``has_key``. Key transforms (``->``,
    ``#>``) work on both. Other databases keep their JSON column, written compactly
    too.
    """

    def db_type(self, connection: BaseDatabaseWrapper) -> str | None:
        if connection.vendor == "postgresql":
            return "json"
        return super().db_type(connection)

    def get_db_prep_value(
        self, value: Any, connection: BaseDatabaseWrapper, prepared: bool = False
    ) -> Any:
        if hasattr(value, "as_sql"):
            return value
        if not prepared:
            value = self.get_prep_value(value)
        if isinstance(value, models.Value) and isinstance(value.output_field, models.JSONField):
            value = value.value
        # Text with no spaces: json keeps what it is given, jsonb's text has them.
        return dumps(value, default=str).decode()


@receiver(connection_created)
def _json_read_as_text(sender: Any, connection: BaseDatabaseWrapper, **kwargs: Any) -> None:
    """Have psycopg hand json over as text, as Django has it do jsonb: JSONField (and
    the migrations' models, which know it as that) parses it itself."""
    if connection.vendor == "postgresql":
        connection.connection.adapters.register_loader("json", TextLoader)


class RealField(models.FloatField):
    """A float kept in 4 bytes (PostgreSQL's ``real``), not 8: about 7 significant
    digits, as many as a timing in milliseconds, a score or a confidence needs.

    PostgreSQL writes a real as the shortest text that reads back as it (0.77, not
    0.7699999809), which is what Python then reads. Other databases keep their float.
    """

    def db_type(self, connection: BaseDatabaseWrapper) -> str | None:
        if connection.vendor == "postgresql":
            return "real"
        return super().db_type(connection)

    def get_prep_value(self, value: Any) -> Any:
        return real_fit(super().get_prep_value(value))


# The smallest normal real and the largest: PostgreSQL refuses a number past what a
# real holds ("out of range"), which would fail a whole batch of decisions.
REAL_SMALLEST = 1.1754944e-38
REAL_LARGEST = 3.4028235e38


def real_fit(value: float | None) -> float | None:
    """``value`` as a real keeps it: 0 under the smallest real (a confidence of
    1e-50), the largest real past it, infinity included (NaN as it is)."""
    if value is None or math.isnan(value):
        return value
    if abs(value) < REAL_SMALLEST:
        return 0.0
    if abs(value) > REAL_LARGEST:
        return math.copysign(REAL_LARGEST, value)
    return value

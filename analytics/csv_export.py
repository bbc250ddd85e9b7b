"""The analytics endpoints' CSV (``?format=csv``): a header row, then one row per line.

A view answers a :class:`CsvTable` when CSV was asked for, built here from a
read's answer; :class:`CsvRenderer` writes it (anything else, errors among
them, is answered as JSON: analytics/api.py). A cell a spreadsheet would run
as a formula is written as text.
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Mapping
from datetime import datetime
from typing import Any, NamedTuple

from rest_framework.renderers import BaseRenderer

# The schema of a CSV answer.
CSV = {"type": "string", "description": "CSV with a header row."}
BY_INTENT_COLUMNS = [
    "intent",
    "backend",
    "requests",
    "success_rate",
    "fallback_rate",
    "p50_ms",
    "p95_ms",
    "mean_score",
    "won",
    "share",
    "avg_tokens",
    "avg_cost",
    "intent_decisions",
    "intent_cached",
]
TIMESERIES_COLUMNS = ["backend", "start", "requests", "success_rate", "p95_ms"]


class CsvTable(NamedTuple):
    """What the analytics views answer when CSV was asked for."""

    columns: list[str]
    rows: list[list[Any]]


class CsvRenderer(BaseRenderer):
    """A CsvTable as text/csv (``?format=csv``): a header row, then one row per line."""

    media_type = "text/csv"
    format = "csv"
    charset = "utf-8"

    def render(
        self,
        data: Any,
        accepted_media_type: str | None = None,
        renderer_context: Mapping[str, Any] | None = None,
    ) -> bytes:
        columns, rows = data  # a CsvTable: finalize_response sends anything else as JSON
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\r\n")
        writer.writerow(columns)
        writer.writerows([[_cell(value) for value in row] for row in rows])
        return out.getvalue().encode()


# What a spreadsheet may take for a formula's first character: = + - @ and every
# character whose compatibility form (NFKC) is one of them (the full-width U+FF1D,
# U+FF0B, U+FF0D and U+FF20, the small, superscript and subscript forms), which some
# read as the ASCII ones.
FORMULA_SIGNS = (
    "+-=@\u207a\u207c\u208a\u208c\u2a75\u2a76\ufb29\ufe62\ufe63\ufe66\ufe6b\uff0b\uff0d\uff1d\uff20"
)
# Where a cell may begin, whichever separator the spreadsheet reads the file with (some
# guess ; or TAB, or split without heeding quotes): at the start of ours, or after
# ; , TAB or a line break; one begins a formula with a sign (after blanks) or with a
# TAB or CR (OWASP's "CSV injection" list).
_FORMULA_START = re.compile(rf"(?:^|(?<=[;,\t\r\n]))(?=\s*[{re.escape(FORMULA_SIGNS)}]|[\t\r])")


def _cell(value: Any) -> Any:
    """A value as a CSV cell: text gets a single quote (OWASP's neutraliser) before
    every place where a formula could begin, so no spreadsheet runs it."""
    if value is None:
        return ""
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, str):
        return _FORMULA_START.sub("'", value)
    return value


def backends_by_intent_table(found: Mapping[str, Any]) -> CsvTable:
    """analytics.reads.backends_by_intent's answer: a row per intent and backend."""
    rows = [
        [
            intent["intent"],
            *(stats[column] for column in BY_INTENT_COLUMNS[1:12]),
            intent["decisions"],
            intent["cached"],
        ]
        for intent in found["intents"]
        for stats in intent["backends"]
    ]
    return CsvTable(list(BY_INTENT_COLUMNS), rows)


def timeseries_table(found: Mapping[str, Any]) -> CsvTable:
    """analytics.reads.timeseries' answer: a row per backend and bucket."""
    rows = [
        [series["backend"], *(point[c] for c in TIMESERIES_COLUMNS[1:])]
        for series in found["backends"]
        for point in series["buckets"]
    ]
    return CsvTable(list(TIMESERIES_COLUMNS), rows)

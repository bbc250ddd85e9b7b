"""The analytics API's CSV: what a spreadsheet opening it may run."""

from __future__ import annotations

import csv
import io
import sys
import unicodedata

import pytest

from analytics.csv_export import FORMULA_SIGNS, CsvRenderer, CsvTable

# Cells a tenant can put in a CSV (a backend's name): each would start a formula in
# some spreadsheet, read with some separator, if written as it is.
PAYLOADS = [
    "=1+1",
    "+1+1",
    "-1+1",
    "@SUM(A1)",
    "\t=1+1",
    "\r=1+1",
    " =1+1",
    '\uff1dHYPERLINK("http://evil.test","x")',
    "\uff0b1",
    "\uff0d1",
    "\uff20SUM(A1)",
    "\ufe661+1",
    "\u3000\uff1d1+1",
    "fw;=1+1",
    "fw,=1+1",
    "fw\t=1+1",
    "fw; =cmd|' /C calc'!A0",
    "fw;\uff1d1+1",
    "fw\n=1+1",
]


def _starts_a_formula(cell: str) -> bool:
    return cell[:1] in ("\t", "\r") or unicodedata.normalize("NFKC", cell.lstrip())[:1] in (
        "=",
        "+",
        "-",
        "@",
    )


def _cells(text: str) -> list[str]:
    """Every cell a spreadsheet might see: the file parsed with each separator, and
    split on each without regard to quotes (as a careless import does)."""
    cells = []
    for separator in (",", ";", "\t"):
        for row in csv.reader(io.StringIO(text, newline=""), delimiter=separator):
            cells.extend(row)
        cells.extend(text.replace("\r\n", "\n").replace(separator, "\n").split("\n"))
    return cells


@pytest.mark.parametrize("payload", PAYLOADS)
def test_no_cell_of_the_csv_starts_a_formula(payload: str) -> None:
    text = CsvRenderer().render(CsvTable(["backend", "requests"], [[payload, 3]])).decode()

    assert [cell for cell in _cells(text) if _starts_a_formula(cell)] == []
    [row] = list(csv.reader(io.StringIO(text, newline="")))[1:]
    assert row[0].replace("'", "") == payload.replace("'", "")  # only quotes were added


def test_numbers_and_plain_names_are_written_as_they_are() -> None:
    text = CsvRenderer().render(CsvTable(["backend", "p95_ms"], [["fw-2 a@b", -1.5]])).decode()

    assert text.splitlines()[1] == "fw-2 a@b,-1.5"


def test_the_formula_signs_are_every_character_read_as_one() -> None:
    """Every character whose compatibility form (NFKC) starts with = + - or @."""
    signs = {
        char
        for char in map(chr, range(sys.maxunicode + 1))
        if unicodedata.normalize("NFKC", char)[:1] in ("=", "+", "-", "@")
    }

    assert set(FORMULA_SIGNS) == signs

"""The analytics API: what a spreadsheet opening its CSV may run, and the decisions as
they read whichever shape their rows keep them in."""

from __future__ import annotations

import csv
import io
import sys
import unicodedata
from typing import Any

import pytest
from rest_framework.test import APIClient

from analytics.csv_export import FORMULA_SIGNS, CsvRenderer, CsvTable
from backends.models import Backend
from chatflows.models import Flow
from flywheel.models import Tenant
from routing.models import Intent, IntentPattern, RoutingDecision
from routing.selection.words import why

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


# --- decisions: rows of either shape read the same ------------------------------------

SUMMARY = "matched 'pull request' (code-review rule 1)"
CANDIDATE = {
    "backend": "flowise-main",
    "kind": "flowise",
    "flow": "Reviewer",
    "flow_id": "ext-7",
    "score": 0.6,
    "success": 0.97,
    "success_margin": 0.03,
    "typical_ms": 812.0,
    "attempts": 140.0,
    "expected_seconds": 0.83,
    "generic": False,
}
ATTEMPT = {
    "backend": "flowise-main",
    "flow": "Reviewer",
    "ok": True,
    "latency_ms": 812.4,
    "error_type": "",
    "error": "",
}


@pytest.mark.django_db
def test_the_decisions_api_shows_earlier_and_compact_rows_alike(
    api_client: APIClient, tenant: Tenant, backend: Backend, django_assert_max_num_queries: Any
) -> None:
    flow = Flow.objects.create(backend=backend, external_id="ext-7", name="Reviewer")
    intent, _ = Intent.objects.get_or_create(slug="code-review", defaults={"name": "Review"})
    rule = IntentPattern.objects.create(intent=intent, pattern="pull request")
    common = {"tenant": tenant, "outcome": "success", "intent": "code-review"}
    RoutingDecision.objects.create(
        question="earlier",
        evidence={"intent": ["pull request"], "intent_summary": SUMMARY},
        candidates=[CANDIDATE],
        fallback_chain=[ATTEMPT],
        **common,
    )
    compact = [
        RoutingDecision.objects.create(
            question=f"compact {n}",
            evidence={"intent": [rule.pk], "intent_summary": SUMMARY},
            candidates=[[backend.pk, flow.pk, 0.6, 0.97, 0.03, 812.0, 140.0, 0.83, False]],
            fallback_chain=[[backend.pk, flow.pk, True, 812.4]],
            **common,
        )
        for n in range(10)
    ]

    # The key, the count, the page, and its backends', flows' and rules' names: not a
    # query per row.
    with django_assert_max_num_queries(7):
        listed = api_client.get("/api/v1/decisions").json()["results"]

    shown = {d["question"]: d for d in listed}
    earlier, new = shown["earlier"], shown["compact 0"]
    assert new["candidates"] == earlier["candidates"] == [CANDIDATE]
    assert new["fallback_chain"] == earlier["fallback_chain"] == [ATTEMPT]
    said = why([CANDIDATE], intent="code-review")  # the earlier rows kept it; said again
    assert new["evidence"] == {"intent": ["pull request"], "intent_summary": SUMMARY, "why": said}
    assert api_client.get(f"/api/v1/decisions/{compact[0].request_id}").json() == new

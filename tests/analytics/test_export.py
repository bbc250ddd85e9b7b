"""export_decisions and import_decisions: an export round-trips, every column of every
row; the window and the tenant choose the rows; bad input and a failure half-way
leave no file; an import is idempotent and all or nothing."""

from __future__ import annotations

import gzip
import json
import re
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection

from analytics import export
from backends.models import Backend
from chatflows.models import Flow
from flywheel.models import Tenant
from routing.models import PerformanceRecord, RoutingDecision, Session

pytestmark = pytest.mark.django_db

T0 = datetime(2026, 11, 1, tzinfo=UTC)
DAY = {"--since": "2026-11-01", "--until": "2026-11-02"}
DAY_NAME = "20261101T000000Z-20261102T000000Z"
EVIDENCE = {
    "summary": "« résumé » du café: 質問は何ですか? 🚀",
    "patterns": [{"pattern": "naïve", "weight": 0.5}, {"pattern": "Straße", "weight": None}],
    "nested": {"empty": {}, "list": [], "null": None, "quote": 'say "hi"\\n', "big": 2**40},
}


@dataclass
class Rows:
    """The rows made for these tests."""

    answered: RoutingDecision  # acme's, everything filled in, one attempt
    failed: RoutingDecision  # acme's, failed: NULLs wherever allowed, two failed attempts
    globex: RoutingDecision  # another tenant's
    next_day: RoutingDecision  # acme's, outside the day
    orphan: PerformanceRecord  # an attempt without a decision


def decide(tenant: Tenant, *, at: datetime, question: str = "q", **fields: Any) -> RoutingDecision:
    decision = RoutingDecision.objects.create(tenant=tenant, question=question, **fields)
    RoutingDecision.objects.filter(pk=decision.pk).update(created_at=at)  # auto_now_add
    decision.refresh_from_db()
    return decision


def attempt(decision: RoutingDecision | None, backend: Backend, **fields: Any) -> PerformanceRecord:
    defaults: dict[str, Any] = {"intent": "code-review", "latency_ms": 120.5, "success": True}
    at = decision.created_at - timedelta(milliseconds=3) if decision else T0 + timedelta(hours=5)
    return PerformanceRecord.objects.create(
        decision=decision, backend=backend, created_at=at, **(defaults | fields)
    )


@pytest.fixture
def other_tenant(db) -> Tenant:
    return Tenant.objects.create(name="Globex", slug="globex")


@pytest.fixture
def rows(tenant: Tenant, other_tenant: Tenant, backend: Backend) -> Rows:
    flow = Flow.objects.create(backend=backend, external_id="f-1", name="Code review")
    session = Session.objects.create(tenant=tenant)
    answered = decide(
        tenant,
        at=T0 + timedelta(hours=1, microseconds=123457),
        session=session,
        question="Revue de code: « ça marche » ? 日本語 ✓",
        intent="code-review",
        intent_confidence=0.8734512345678901,
        intent_method="rules",
        query_type="LOCAL",
        query_type_confidence=0.61,
        evidence=EVIDENCE,
        backend=backend,
        flow=flow,
        score=0.42,
        candidates=[{"backend": "flowise-main", "factors": {"perf": 0.9, "cost": None}}],
        fallback_chain=[{"backend": "flowise-main", "outcome": "success"}],
        outcome="success",
        corrected_intent="summarize",
        corrected_at=T0 + timedelta(days=3),
        classify_ms=1.25,
        route_ms=0.5,
        execute_ms=812.0,
        total_ms=814.75,
    )
    attempt(answered, backend, flow=flow, prompt_tokens=12, completion_tokens=30,
            total_tokens=42, cost=0.00031)  # fmt: skip
    failed = decide(
        tenant,
        at=T0 + timedelta(hours=2),
        question="",
        outcome="failed",
        error_type="UpstreamError",
        error_message='Le backend a répondu 502: "Bad Gateway"\nligne 2',
    )
    attempt(failed, backend, success=False, error_type="HTTP502", latency_ms=0)
    attempt(failed, backend, success=False, error_type="Timeout", latency_ms=30000)
    globex = decide(other_tenant, at=T0 + timedelta(hours=3), outcome="success", backend=backend)
    attempt(globex, backend)
    next_day = decide(tenant, at=T0 + timedelta(days=1, hours=1), outcome="cached")
    attempt(next_day, backend)
    orphan = attempt(None, backend, intent="general")
    return Rows(answered, failed, globex, next_day, orphan)


def run(command: str, *args: str, **options: Any) -> str:
    out = StringIO()
    call_command(command, *args, stdout=out, **options)
    return out.getvalue()


def export_day(out: Path, *extra: str) -> str:
    flags = [part for pair in DAY.items() for part in pair]
    return run("export_decisions", *flags, "--out", str(out), *extra)


def lines(path: Path) -> list[dict[str, Any]]:
    with gzip.open(path, "rt", encoding="utf-8") as file:
        return [json.loads(line) for line in file]


def stored(model: type[RoutingDecision] | type[PerformanceRecord]) -> list[dict[str, Any]]:
    """Every column of every row, in id order."""
    names = [field.attname for field in model._meta.concrete_fields]
    return list(model.objects.order_by("id").values(*names))


def forget(*decisions: RoutingDecision) -> None:
    """Delete decisions with their performance records, as dropping their day would."""
    PerformanceRecord.objects.filter(decision__in=decisions).delete()
    RoutingDecision.objects.filter(pk__in=[each.pk for each in decisions]).delete()


def no_files(directory: Path) -> bool:
    return not directory.exists() or not any(directory.iterdir())


def test_an_export_round_trips_every_column_of_every_row(rows: Rows, tmp_path: Path) -> None:
    decisions, performance = stored(RoutingDecision), stored(PerformanceRecord)

    said = export_day(tmp_path, "--batch", "2")  # two pages of decisions, three of records

    path, records = (tmp_path / f"{table}-{DAY_NAME}.jsonl.gz" for table in export.TABLES)
    assert said.splitlines() == [
        f"decisions: 3 rows, {path.stat().st_size} bytes, {path}",
        f"performance: 5 rows, {records.stat().st_size} bytes, {records}",
    ]
    forget(rows.answered, rows.failed, rows.globex)
    PerformanceRecord.objects.filter(pk=rows.orphan.pk).delete()

    said = run("import_decisions", str(path))

    assert stored(RoutingDecision) == decisions
    assert stored(PerformanceRecord) == performance
    assert said.splitlines()[0] == f"decisions: 3 rows imported, 0 there already, {path}"
    assert said.splitlines()[1].startswith("performance: 5 rows imported, 0 there already, ")


def test_each_row_is_a_json_object_of_every_column(rows: Rows, tmp_path: Path) -> None:
    export_day(tmp_path)

    decisions = lines(tmp_path / f"decisions-{DAY_NAME}.jsonl.gz")
    records = lines(tmp_path / f"performance-{DAY_NAME}.jsonl.gz")

    columns = [field.attname for field in RoutingDecision._meta.concrete_fields]
    assert [list(row) for row in decisions] == [columns] * 3
    assert {*records[0]} == {field.attname for field in PerformanceRecord._meta.concrete_fields}
    answered, failed, _ = decisions  # in id order
    assert answered["request_id"] == str(rows.answered.request_id)
    assert answered["created_at"] == "2026-11-01T01:00:00.123457+00:00"
    assert answered["corrected_at"] == "2026-11-04T00:00:00+00:00"
    assert answered["evidence"] == EVIDENCE  # nested JSON, not a string
    assert answered["intent_confidence"] == rows.answered.intent_confidence
    assert failed["backend_id"] is None
    assert failed["score"] is None
    assert failed["evidence"] == {}
    # UTF-8 as it is, not \u escapes: a warehouse reads it, so does a person.
    assert "質問は何ですか? 🚀" in gzip.decompress(
        (tmp_path / f"decisions-{DAY_NAME}.jsonl.gz").read_bytes()
    ).decode("utf-8")
    assert [row["cost"] for row in records] == [0.00031, None, None, None, None]


def test_the_window_chooses_the_rows_by_their_own_creation(rows: Rows, tmp_path: Path) -> None:
    said = run(
        "export_decisions", "--since", "2026-11-01T01:30", "--until", "2026-11-01T03:30+01:00",
        "--out", str(tmp_path),
    )  # fmt: skip

    name = "20261101T013000Z-20261101T023000Z"
    decisions = lines(tmp_path / f"decisions-{name}.jsonl.gz")
    records = lines(tmp_path / f"performance-{name}.jsonl.gz")
    assert [row["id"] for row in decisions] == [rows.failed.pk]
    assert [row["decision_id"] for row in records] == [rows.failed.pk, rows.failed.pk]
    assert "decisions: 1 rows" in said


def test_until_defaults_to_now(rows: Rows, tmp_path: Path) -> None:
    run("export_decisions", "--since", "2026-11-01", "--out", str(tmp_path))

    [decisions, _] = sorted(tmp_path.iterdir())
    assert decisions.name.startswith("decisions-20261101T000000Z-")
    assert len(lines(decisions)) == 4  # the next day's too


def test_a_tenant_exports_its_decisions_and_their_attempts(rows: Rows, tmp_path: Path) -> None:
    export_day(tmp_path, "--tenant", "acme")

    decisions = lines(tmp_path / f"decisions-{DAY_NAME}-acme.jsonl.gz")
    records = lines(tmp_path / f"performance-{DAY_NAME}-acme.jsonl.gz")
    assert [row["id"] for row in decisions] == [rows.answered.pk, rows.failed.pk]
    assert {row["decision_id"] for row in records} == {rows.answered.pk, rows.failed.pk}
    assert len(records) == 3  # not globex's, nor the one without a decision


def test_an_empty_window_writes_two_empty_files(tenant: Tenant, tmp_path: Path) -> None:
    said = export_day(tmp_path)

    assert "decisions: 0 rows" in said
    assert lines(tmp_path / f"decisions-{DAY_NAME}.jsonl.gz") == []
    assert lines(tmp_path / f"performance-{DAY_NAME}.jsonl.gz") == []


@pytest.mark.parametrize(
    ("args", "error"),
    [
        (["--since", "2026-13-01"], "--since '2026-13-01' is not an ISO date or datetime"),
        (["--since", "last week"], "--since 'last week' is not an ISO date or datetime"),
        (["--since", "2026-11-01", "--until", "1/11/2026"], "--until '1/11/2026' is not"),
        (["--since", "2026-11-02", "--until", "2026-11-01"], "is not before until"),
        (["--since", "2026-11-01", "--until", "2026-11-01"], "is not before until"),
        (["--since", "2026-11-01", "--tenant", "nobody"], "No tenant with slug 'nobody'."),
        (["--since", "2026-11-01", "--batch", "0"], "--batch must be at least 1."),
    ],
)
def test_bad_input_is_refused_and_writes_nothing(
    rows: Rows, tmp_path: Path, args: list[str], error: str
) -> None:
    out = tmp_path / "exports"

    with pytest.raises(CommandError, match=re.escape(error)):
        run("export_decisions", *args, "--out", str(out))

    assert no_files(out)


def test_an_export_there_already_is_not_overwritten(rows: Rows, tmp_path: Path) -> None:
    export_day(tmp_path)
    forget(rows.answered, rows.failed, rows.globex)  # the day's partition was dropped
    before = {path.name: path.read_bytes() for path in tmp_path.iterdir()}

    with pytest.raises(CommandError, match=f"decisions-{DAY_NAME}.jsonl.gz exists already"):
        export_day(tmp_path)

    assert {path.name: path.read_bytes() for path in tmp_path.iterdir()} == before


@pytest.mark.parametrize("failing", ["decisions", "performance"])
def test_an_export_failing_half_way_leaves_no_file(
    rows: Rows, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, failing: str
) -> None:
    pages = export._pages
    model = export.TABLES[failing]

    def first_page_then_fail(rows: Any, *, batch: int) -> Iterator[list[dict[str, Any]]]:
        for number, page in enumerate(pages(rows, batch=batch)):
            if number == 1 and rows.model is model:
                raise OSError(28, "No space left on device")
            yield page

    monkeypatch.setattr(export, "_pages", first_page_then_fail)

    with pytest.raises(CommandError, match=r"could not be written: .*No space left on device"):
        export_day(tmp_path / "exports", "--batch", "1")

    assert no_files(tmp_path / "exports")


def test_an_import_is_idempotent(rows: Rows, tmp_path: Path) -> None:
    export_day(tmp_path, "--tenant", "acme")
    forget(rows.failed)
    decisions, performance = stored(RoutingDecision), stored(PerformanceRecord)

    first = run("import_decisions", str(tmp_path / f"performance-{DAY_NAME}-acme.jsonl.gz"))
    again = run("import_decisions", str(tmp_path / f"decisions-{DAY_NAME}-acme.jsonl.gz"))

    assert first.splitlines()[0].startswith("decisions: 1 rows imported, 1 there already")
    assert first.splitlines()[1].startswith("performance: 2 rows imported, 1 there already")
    assert again.splitlines()[0].startswith("decisions: 0 rows imported, 2 there already")
    assert again.splitlines()[1].startswith("performance: 0 rows imported, 3 there already")
    assert len(stored(RoutingDecision)) == len(decisions) + 1
    assert len(stored(PerformanceRecord)) == len(performance) + 2


def test_an_import_is_all_or_nothing(rows: Rows, tmp_path: Path) -> None:
    export_day(tmp_path)
    forget(rows.answered, rows.globex)
    # Another decision has the failed one's id here (a database with other history).
    RoutingDecision.objects.filter(pk=rows.failed.pk).update(request_id=uuid.uuid4())
    decisions, performance = stored(RoutingDecision), stored(PerformanceRecord)

    with pytest.raises(CommandError, match=f"id {rows.failed.pk} is another row's here"):
        run("import_decisions", str(tmp_path / f"decisions-{DAY_NAME}.jsonl.gz"), "--batch", "1")

    assert stored(RoutingDecision) == decisions  # the first batch's decision was not kept
    assert stored(PerformanceRecord) == performance


def test_an_import_needs_the_tenants(rows: Rows, other_tenant: Tenant, tmp_path: Path) -> None:
    export_day(tmp_path, "--tenant", "globex")
    globex_id = other_tenant.pk
    other_tenant.delete()  # its decisions with it
    performance = stored(PerformanceRecord)

    with pytest.raises(CommandError, match=f"no tenant with id {globex_id} here; import"):
        run("import_decisions", str(tmp_path / f"decisions-{DAY_NAME}-globex.jsonl.gz"))

    assert stored(PerformanceRecord) == performance


@pytest.mark.parametrize(
    ("content", "error"),
    [
        (b"not gzip", "cannot be read: Not a gzipped file"),
        (gzip.compress(b'{"id": 1}\n{"id": ', mtime=0), "line 2: "),
        (gzip.compress(b'{"id": 1, "created_at": "yesterday"}\n', mtime=0), "line 1: .*yesterday"),
        (gzip.compress(b'{"id": 1}\n', mtime=0)[:-4], "cannot be read: Compressed file ended"),
    ],
    # named: each xdist worker collects the parameters itself and must name them alike
    ids=["not gzip", "a torn line", "a line that is not a record", "a torn file"],
)
def test_a_file_that_is_not_an_export_is_refused(
    rows: Rows, tmp_path: Path, content: bytes, error: str
) -> None:
    export_day(tmp_path)
    (tmp_path / f"decisions-{DAY_NAME}.jsonl.gz").write_bytes(content)
    decisions = stored(RoutingDecision)

    with pytest.raises(CommandError, match=error):
        run("import_decisions", str(tmp_path / f"decisions-{DAY_NAME}.jsonl.gz"))

    assert stored(RoutingDecision) == decisions


@pytest.mark.parametrize(
    ("name", "error"),
    [
        (f"decisions-{DAY_NAME}.jsonl.gz", "is not there: an export is two files"),
        ("history.jsonl.gz", "is not an export's file"),
    ],
)
def test_an_import_names_what_is_missing(tmp_path: Path, name: str, error: str) -> None:
    with pytest.raises(CommandError, match=error):
        run("import_decisions", str(tmp_path / name))


def test_rows_written_after_an_import_take_new_ids(rows: Rows, tmp_path: Path) -> None:
    export_day(tmp_path)
    top = max(rows.answered.pk, rows.failed.pk, rows.globex.pk)
    forget(rows.answered, rows.failed, rows.globex, rows.next_day)
    # A fresh database: its sequences start at 1.
    with connection.cursor() as cursor:
        for model in (RoutingDecision, PerformanceRecord):
            cursor.execute(
                "SELECT setval(pg_get_serial_sequence(%s, 'id'), 1, false)",
                [model._meta.db_table],
            )

    run("import_decisions", str(tmp_path / f"decisions-{DAY_NAME}.jsonl.gz"))

    later = decide(rows.answered.tenant, at=T0, outcome="success")
    assert later.pk > top
    assert attempt(later, rows.orphan.backend).pk > rows.orphan.pk

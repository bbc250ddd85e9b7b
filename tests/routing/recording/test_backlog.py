"""The writer's backlog is bounded: past its memory, decisions wait in the spool alone."""

from __future__ import annotations

import asyncio
import contextlib
import os
import uuid
from collections.abc import Iterator

import psycopg
import pytest
from django.db import connection
from prometheus_client import REGISTRY

from flywheel.errors import UnavailableError
from flywheel.metrics import WRITER_MEMORY
from flywheel.models import Tenant
from routing.models import RoutingDecision, Turn
from routing.recording import writer as recording
from routing.recording.spool import Spool
from routing.recording.writer import decision_spool, drain, record_kept, record_later
from tests.disks import FillingDisk
from tests.routing.recording.test_writer import decision

pytestmark = pytest.mark.django_db(transaction=True)

LIMIT = 4_000  # bytes: about ten of these decisions


@contextlib.contextmanager
def decisions_locked() -> Iterator[None]:
    """The decisions table locked by another connection: the writer waits on it."""
    settings = connection.settings_dict
    with psycopg.connect(
        host=settings["HOST"],
        port=settings["PORT"],
        user=settings["USER"],
        password=settings["PASSWORD"],
        dbname=settings["NAME"],
    ) as other:
        other.execute("LOCK TABLE analytics_routingdecision IN ACCESS EXCLUSIVE MODE")
        yield
        other.rollback()


@pytest.fixture
def small_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(recording._writer._backlog, "limit", LIMIT)


def _refused(fate: str) -> float:
    return REGISTRY.get_sample_value("flywheel_spool_refused_total", {"fate": fate}) or 0.0


def _memory() -> float:
    return WRITER_MEMORY._value.get()


def test_a_stalled_writer_holds_no_more_than_its_memory_and_then_writes_all_in_order(
    tenant: Tenant, small_memory: None
) -> None:
    sessions = [uuid.uuid4() for _ in range(3)]
    sent = []
    before = _memory()
    with decisions_locked():
        peak = 0
        for i in range(300):
            data = decision(tenant, sessions[i % 3], question=f"q{i}", answer=f"a{i}")
            record_later(data, performance_window=10)
            sent.append(data)
            peak = max(peak, recording._writer._backlog.held)
        spilled = recording._writer.full
        on_disk = decision_spool().spilled()
        memory = _memory() - before
    drain(60)

    assert peak <= LIMIT  # before: every decision of the stall stayed in memory
    assert spilled
    assert on_disk
    assert 0 < memory <= LIMIT
    stored = set(RoutingDecision.objects.values_list("request_id", flat=True))
    assert stored == {data.request_id for data in sent}
    for session in sessions:  # a session's turns were written in the order they came
        questions = list(Turn.objects.filter(session_id=session).order_by("id"))
        assert [t.question for t in questions] == [
            d.question for d in sent if d.session_id == session
        ]
    assert not recording._writer.full  # caught up: memory holds decisions again
    assert recording._writer._backlog.held == 0
    assert _memory() == before


def test_past_its_memory_and_its_disk_an_answer_is_refused_and_a_failure_dropped(
    tenant: Tenant, small_memory: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Spool first, then refusal: with the writer behind and the spool refusing too, an
    answer's decision gets 503 at once (no synchronous write queued behind the stall)."""
    stored_now: list[object] = []
    monkeypatch.setattr(recording._Writer, "store_now", lambda *a: stored_now.append(a))
    fates = {fate: _refused(fate) for fate in ("refused", "dropped")}
    with decisions_locked():
        for i in range(30):  # fills memory; the rest spill
            record_later(decision(tenant, question=f"q{i}"), performance_window=10)
        assert recording._writer.full
        disk = FillingDisk(monkeypatch, decision_spool().directory, room=0)
        refused = decision(tenant, question="refused")
        with pytest.raises(UnavailableError, match="could not be recorded"):
            asyncio.run(record_kept(refused, performance_window=10))
        dropped = decision(tenant, question="a failure, dropped")
        record_later(dropped, performance_window=10)
        disk.free()
    drain(60)

    assert stored_now == []
    assert {fate: _refused(fate) - n for fate, n in fates.items()} == {"refused": 1, "dropped": 1}
    stored = set(RoutingDecision.objects.values_list("question", flat=True))
    assert stored == {f"q{i}" for i in range(30)}


def test_a_spilled_segment_is_deleted_once_read_back_and_written(
    tenant: Tenant, small_memory: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(Spool, "ROTATE_SECONDS", 0.0)
    spool = decision_spool()
    # The writer and its spool serve the whole process: what earlier tests in it left
    # is theirs, so this test counts from there.
    ours = f"{os.getpid()}-*.jsonl"
    segments, held = set(spool.directory.glob(ours)), spool.held()
    with decisions_locked():
        for i in range(30):
            record_later(decision(tenant, question=f"q{i}"), performance_window=10)
        assert spool.spilled()
        spilled = {s.path for s in spool._spilled}
    drain(60)
    spool.sync()

    assert RoutingDecision.objects.count() == 30
    assert spool.held() == held
    # This test's segments, the spilled one too, are gone.
    assert spilled
    assert not spilled & set(spool.directory.glob(ours))
    assert set(spool.directory.glob(ours)) <= segments

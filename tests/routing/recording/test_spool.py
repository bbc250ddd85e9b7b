"""Decisions are durable once their answer is out: the spool, retries, replay."""

from __future__ import annotations

import errno
import io
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path
from typing import Any

import psycopg
import pytest
from asgiref.sync import async_to_sync
from django.core.management import call_command
from django.db import InterfaceError, OperationalError, connection
from django.db.backends.postgresql.base import DatabaseWrapper
from prometheus_client import REGISTRY

from flywheel.errors import UnavailableError
from flywheel.models import Tenant
from routing.models import PerformanceRecord, RoutingDecision
from routing.recording import spool as spool_module
from routing.recording import writer as recording
from routing.recording.decision import DecisionData
from routing.recording.framing import decode, encode
from routing.recording.spool import REJECTED, Spool
from routing.recording.writer import (
    decision_spool,
    drain,
    record_kept,
    record_later,
    spooled_replay,
)
from routing.selection.attempt import Attempt
from tests.disks import FillingDisk

pytestmark = pytest.mark.django_db(transaction=True)


def decision(tenant_id: int, **fields: Any) -> DecisionData:
    given = {"question": "What is a flywheel?", "outcome": "success", "intent": "general"}
    return DecisionData(request_id=uuid.uuid4(), tenant_id=tenant_id, **(given | fields))


def spooled(directory: Path) -> list[DecisionData]:
    segments = [p for p in directory.glob("*.jsonl") if p.name != REJECTED]
    return [decode(line) for path in segments for line in path.open("rb")]


def test_a_decision_is_on_disk_before_record_later_returns(tenant: Tenant) -> None:
    data = decision(
        tenant.pk,
        answer="odd text \ud800 kept as written",  # a lone surrogate survives the round trip
        evidence={"rules": {"matched": ["review"]}},
        attempts=(Attempt(1, "fw", 2, "reviewer", ok=True, latency_ms=12.5),),
    )
    record_later(data, performance_window=10)

    assert data in spooled(decision_spool().directory)
    drain()
    assert RoutingDecision.objects.filter(request_id=data.request_id).exists()


def _database_url() -> str:
    db = connection.settings_dict
    return f"postgres://{db['USER']}@{db['HOST']}:{db['PORT']}/{db['NAME']}"


# A web process: one decision written, then five held by its writer threads
# (gathering for an hour) when it is killed.
_KILLED = textwrap.dedent(
    """
    import sys, time, uuid
    import django
    django.setup()
    from routing.recording import writer as recording
    from routing.recording.decision import DecisionData
    from routing.recording.writer import drain, record_later

    tenant, written = int(sys.argv[1]), uuid.UUID(sys.argv[2])
    record_later(DecisionData(written, tenant, "written", "success"), performance_window=10)
    drain()
    recording._Writer.GATHER_SECONDS = 3600
    recording._Writer.BATCH = 1_000_000
    for i in range(5):
        held = DecisionData(uuid.uuid4(), tenant, f"held {i}", "success")
        record_later(held, performance_window=10)
    print("held", flush=True)
    time.sleep(120)
    """
)


def test_a_killed_process_loses_no_decision_and_replay_writes_each_once(
    tenant: Tenant, tmp_path: Path
) -> None:
    written = uuid.uuid4()
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "flywheel.settings"}
    env |= {"DATABASE_URL": _database_url(), "FLYWHEEL_SPOOL_DIR": str(tmp_path)}
    process = subprocess.Popen(  # noqa: S603
        [sys.executable, "-c", _KILLED, str(tenant.pk), str(written)],
        env=env,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        assert process.stdout.readline().strip() == "held"
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=30)

    assert list(RoutingDecision.objects.values_list("question", flat=True)) == ["written"]
    segments = list(decision_spool(tmp_path).directory.glob("*.jsonl"))
    assert len(segments) == 1
    with segments[0].open("ab") as torn:  # a machine crash can leave half a line
        torn.write(b'{"request_id": "4f1c')

    assert spooled_replay(tmp_path) == 6  # the written one is skipped by its request id
    questions = sorted(RoutingDecision.objects.values_list("question", flat=True))
    assert questions == ["held 0", "held 1", "held 2", "held 3", "held 4", "written"]
    assert list(decision_spool(tmp_path).directory.glob("*.jsonl")) == []
    assert spooled_replay(tmp_path) == 0


def test_a_live_process_segment_is_not_replayed(tenant: Tenant, tmp_path: Path) -> None:
    spool = decision_spool(tmp_path)
    spool.append(decision(tenant.pk))  # this process holds the lock on its segment

    other = decision_spool(tmp_path)  # as another process would see the directory
    assert other.replay(lambda batch: pytest.fail("replayed a live segment")) == 0
    assert RoutingDecision.objects.count() == 0


def test_segments_rotate_by_size_and_a_committed_one_is_deleted(
    tenant: Tenant, tmp_path: Path, settings: Any
) -> None:
    settings.SPOOL_SEGMENT_BYTES = 50_000
    spool = decision_spool(tmp_path)
    big = [decision(tenant.pk, answer="x" * 20_000) for _ in range(6)]

    segments = [spool.append(data) for data in big]

    # A segment is closed once it passes the bound: six 20 kB decisions make two files
    # of three, where counting entries alone would have kept them all in one.
    assert [segments.index(s) for s in segments] == [0, 0, 0, 3, 3, 3]
    first = segments[0]
    spool.settle(first, 3)
    assert not first.path.exists()
    assert spooled(spool.directory) == big[3:]


@pytest.fixture
def database_down(monkeypatch: pytest.MonkeyPatch) -> Any:
    """New connections fail as they do while PostgreSQL is stopped; undo() brings it back."""

    def refused(self: DatabaseWrapper, params: dict[str, Any]) -> Any:
        raise psycopg.OperationalError("connection failed: Connection refused")

    monkeypatch.setattr(recording._Writer, "RETRY_FIRST_SECONDS", 0.05)
    monkeypatch.setattr(recording._Writer, "RETRY_MAX_SECONDS", 0.1)
    patch = pytest.MonkeyPatch()
    patch.setattr(DatabaseWrapper, "get_new_connection", refused)
    yield patch
    patch.undo()


def test_decisions_wait_out_a_database_outage(
    tenant: Tenant, database_down: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    sent = [decision(tenant.pk, question=f"during the outage {i}") for i in range(3)]
    for data in sent:
        record_later(data, performance_window=10)
    recording._writer.hurry()
    deadline = time.monotonic() + 10
    while "the database is unreachable" not in caplog.text and time.monotonic() < deadline:
        time.sleep(0.02)
    assert "the database is unreachable" in caplog.text
    time.sleep(0.3)  # a few retries fail meanwhile

    database_down.undo()
    drain(timeout=10)

    stored = set(RoutingDecision.objects.values_list("request_id", flat=True))
    assert stored == {d.request_id for d in sent}
    assert "Could not record decision" not in caplog.text


def test_a_decision_the_database_refuses_is_set_aside_and_the_batch_written(
    tenant: Tenant, backend: Any, caplog: pytest.LogCaptureFixture
) -> None:
    attempt = Attempt(backend.pk, backend.name, 0, "", ok=True, latency_ms=5.0)
    good = [decision(tenant.pk, attempts=(attempt,)) for _ in range(2)]
    orphan = decision(999_999_999)  # its tenant does not exist: a foreign key violation
    for data in [good[0], orphan, good[1]]:
        record_later(data, performance_window=10)
    drain()

    assert set(RoutingDecision.objects.values_list("request_id", flat=True)) == {
        d.request_id for d in good
    }
    assert PerformanceRecord.objects.count() == 2
    rejected = (decision_spool().directory / REJECTED).read_text().splitlines()
    entries = [json.loads(line) for line in rejected]
    assert [e["decision"]["request_id"] for e in entries][-1] == str(orphan.request_id)
    assert "IntegrityError" in entries[-1]["error"]


def test_the_replay_command_writes_what_a_dead_process_left(tenant: Tenant) -> None:
    left = decision(tenant.pk, question="left behind")
    directory = decision_spool().directory
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "4242-1.jsonl").write_bytes(encode(left))  # nobody holds its lock
    out = io.StringIO()

    call_command("replay_decisions", stdout=out)

    assert "Replayed 1 spooled decisions" in out.getvalue()
    assert RoutingDecision.objects.get().request_id == left.request_id


def test_a_spool_that_cannot_be_written_costs_durability_not_the_decision(
    tenant: Tenant,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("")  # the spool's directory would have to be inside a file
    recording._writer._start()
    monkeypatch.setattr(recording._writer, "_spool", Spool(blocker / "spool"))
    data = decision(tenant.pk)

    record_later(data, performance_window=10)
    drain()

    assert RoutingDecision.objects.filter(request_id=data.request_id).exists()
    assert "The decision spool refuses writes" in caplog.text


def test_a_set_aside_decision_is_not_replayed_away(tenant: Tenant) -> None:
    orphan = decision(999_999_998)  # its tenant does not exist
    record_later(orphan, performance_window=10)
    drain()
    rejected = decision_spool().directory / REJECTED
    assert str(orphan.request_id) in rejected.read_text()

    spooled_replay()

    assert str(orphan.request_id) in rejected.read_text()


def test_a_failing_batch_does_not_stop_its_writer_thread(
    tenant: Tenant, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    real = recording._store
    calls = {"n": 0}

    def broken_once(batch: Any, window: int, spool: Any) -> None:
        calls["n"] += 1
        if calls["n"] == 1:
            raise RuntimeError("a bug in the writer")
        real(batch, window, spool)

    monkeypatch.setattr(recording, "_store", broken_once)
    first, second = decision(tenant.pk), decision(tenant.pk)
    record_later(first, performance_window=10)
    drain()
    record_later(second, performance_window=10)
    drain()

    assert "The decision writer failed on a batch" in caplog.text
    assert RoutingDecision.objects.filter(request_id=second.request_id).exists()


def test_only_an_unreachable_database_is_waited_out() -> None:
    class Cause(Exception):
        def __init__(self, sqlstate: str | None) -> None:
            super().__init__(sqlstate)
            self.sqlstate = sqlstate

    def operational(sqlstate: str | None) -> OperationalError:
        err = OperationalError("x")
        err.__cause__ = Cause(sqlstate)
        return err

    database_down = recording.database_down
    assert database_down(operational(None))  # refused, pool timeout: no server answered
    assert database_down(operational("08006"))  # connection failure
    assert database_down(operational("57P01"))  # the server is shutting down
    assert not database_down(operational("40P01"))  # a deadlock: this write, not an outage
    assert not database_down(operational("54000"))  # a limit exceeded
    assert database_down(InterfaceError("connection already closed"))
    assert not database_down(ValueError("x"))


# --- a disk that fills up -------------------------------------------------------------


def test_a_write_cut_short_by_a_full_disk_leaves_no_fragment_and_the_next_line_survives(
    tenant: Tenant, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spool = Spool(tmp_path)
    first, lost, after = (decision(tenant.pk, question=f"q{i}") for i in range(3))
    segment = spool.append(first)
    disk = FillingDisk(monkeypatch, tmp_path, room=40)  # part of the next line fits

    with pytest.raises(OSError, match="No space left"):
        spool.append(lost)
    disk.free()
    spool.append(after)

    # Before, the fragment counted as appended and the next line was glued onto it:
    # three appends without an error, one line readable.
    assert segment.appended == 2
    assert spooled(tmp_path) == [first, after]


def test_a_short_write_is_completed(
    tenant: Tenant, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = os.write
    monkeypatch.setattr(spool_module.os, "write", lambda fd, data: real(fd, bytes(data)[:10]))
    spool = Spool(tmp_path)
    data = decision(tenant.pk)

    spool.append(data)

    assert spooled(tmp_path) == [data]


def test_a_torn_line_that_cannot_be_cut_back_is_skipped_on_replay_and_the_rest_survive(
    tenant: Tenant,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    spool = Spool(tmp_path)
    first, lost, after = (decision(tenant.pk, question=f"q{i}") for i in range(3))
    spool.append(first)
    disk = FillingDisk(monkeypatch, tmp_path, room=60)

    def refused(fd: int, length: int) -> None:
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(spool_module.os, "ftruncate", refused)
    with pytest.raises(OSError, match="No space left"):
        spool.append(lost)
    disk.free()
    os.close(spool.append(after).fd)  # as a process killed now: its segment stays, unlocked

    lines = next(tmp_path.glob("*.jsonl")).read_bytes().splitlines()
    assert len(lines) == 3  # the torn one has a line of its own
    replayed: list[DecisionData] = []
    assert Spool(tmp_path).replay(replayed.extend) == 2
    assert replayed == [first, after]
    assert "line 2 is unreadable" in caplog.text


def test_a_committed_segment_is_deleted_within_a_second_even_while_written_to(
    tenant: Tenant, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spool = Spool(tmp_path)
    segment = spool.append(decision(tenant.pk))
    spool.settle(segment)
    assert segment.path.exists()  # a new file per decision would cost the quiet hours

    monkeypatch.setattr(spool_module.time, "monotonic", lambda: segment.opened + 1.5)
    spool.sync()  # the keeper, every second

    assert not segment.path.exists()
    later = spool.append(decision(tenant.pk))
    assert later is not segment
    assert later.path.exists()


def test_an_answer_the_spool_refuses_is_in_the_database_before_it_goes_out(
    tenant: Tenant,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    recording._writer._start()
    monkeypatch.setattr(recording._writer, "_spool", Spool(tmp_path))
    disk = FillingDisk(monkeypatch, tmp_path, room=0)
    sent = [decision(tenant.pk, answer=f"answer {i}") for i in range(3)]
    before = _refused("stored_now")

    for data in sent:
        async_to_sync(record_kept)(data, performance_window=10)
        # No drain: it is stored before record_kept returns.
        assert RoutingDecision.objects.filter(request_id=data.request_id).exists()

    assert _refused("stored_now") - before == 3
    assert caplog.text.count("The decision spool refuses writes") == 1  # not one per decision
    disk.free()
    record_later(decision(tenant.pk), performance_window=10)
    assert "The decision spool takes writes again (3 refused meanwhile)" in caplog.text


def test_an_answer_neither_the_spool_nor_the_database_can_keep_is_refused(
    tenant: Tenant,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    database_down: pytest.MonkeyPatch,
    settings: Any,
) -> None:
    recording._writer._start()
    monkeypatch.setattr(recording._writer, "_spool", Spool(tmp_path))
    FillingDisk(monkeypatch, tmp_path, room=0)
    refused, kept = decision(tenant.pk, answer="refused"), decision(tenant.pk, answer="kept")
    before = _refused("refused")

    with pytest.raises(UnavailableError, match="could not be recorded"):
        async_to_sync(record_kept)(refused, performance_window=10)
    assert _refused("refused") - before == 1

    settings.ANSWER_UNRECORDED = True  # the operator chose answers over records
    async_to_sync(record_kept)(kept, performance_window=10)
    database_down.undo()
    drain(timeout=10)
    assert list(RoutingDecision.objects.values_list("question", flat=True)) == [kept.question]


def _refused(fate: str) -> float:
    return REGISTRY.get_sample_value("flywheel_spool_refused_total", {"fate": fate}) or 0.0

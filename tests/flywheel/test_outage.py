"""While the database is down, calls learn it once: one tries it now and then."""

from __future__ import annotations

import pytest
from django.db import OperationalError

from flywheel import outage
from flywheel.outage import DatabaseOutage


def test_once_down_calls_fail_at_once_but_one_call_per_interval_tries_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clock = [100.0]
    monkeypatch.setattr(outage.time, "monotonic", lambda: clock[0])
    found = DatabaseOutage()
    found.admit()  # up: every call goes through
    found.failed(OperationalError("connection refused"))

    with pytest.raises(OperationalError, match=r"unreachable for 0\.0 s"):
        found.admit()
    clock[0] += outage.PROBE_SECONDS
    found.admit()  # this one tries the database...
    with pytest.raises(OperationalError):
        found.admit()  # ...and the others do not, meanwhile
    found.failed(OperationalError("connection refused"))
    with pytest.raises(OperationalError):
        found.admit()

    clock[0] += outage.PROBE_SECONDS
    found.admit()
    found.answered()  # it is back
    found.admit()
    found.admit()
    assert found.down_since is None


def test_a_probe_that_ends_in_another_error_leaves_the_next_call_to_probe(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clock = [100.0]
    monkeypatch.setattr(outage.time, "monotonic", lambda: clock[0])
    found = DatabaseOutage()
    found.failed(OperationalError("connection refused"))
    clock[0] += outage.PROBE_SECONDS
    found.admit()  # the probe...
    found.inconclusive()  # ...ended in an error of another kind

    found.admit()  # so this call probes, not refused for ever

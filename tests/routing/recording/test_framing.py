"""The spool's lines: every field survives, and a damaged line is refused."""

from __future__ import annotations

import uuid

import pytest

from flywheel.models import Tenant
from routing.recording.framing import decode, encode, unframed
from routing.selection.attempt import Attempt
from tests.routing.recording.test_spool import decision

pytestmark = pytest.mark.django_db


def test_encoding_round_trips_every_field(tenant: Tenant) -> None:
    data = decision(
        tenant.pk,
        session_id=uuid.uuid4(),
        intent_confidence=0.9,
        candidates=[{"backend": "fw", "score": 0.8}],
        attempts=(Attempt(1, "fw", 2, "r", ok=False, latency_ms=3.0, error_type="Timeout"),),
        timings={"total_ms": 4.2},
    )
    assert decode(encode(data)) == data


def test_a_line_with_a_damaged_byte_is_refused_and_bare_json_lines_still_read(
    tenant: Tenant,
) -> None:
    data = decision(tenant.pk)
    line = encode(data)
    damaged = line.replace(b"flywheel", b"flywheeL")

    with pytest.raises(ValueError, match="checksum"):
        decode(damaged)
    assert decode(unframed(line)) == data  # a segment written before lines were framed

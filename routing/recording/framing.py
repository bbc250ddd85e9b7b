"""The spool's lines: one decision each, framed so a torn or damaged one is detected.

A line is the CRC-32 of its JSON in eight hex digits, a space, then the JSON
(flywheel.jsonout), then a newline. A line of bare JSON, written before lines were
framed, is still read.
"""

from __future__ import annotations

import json
import logging
import uuid
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from flywheel.jsonout import dumps
from routing.recording.decision import DecisionData
from routing.selection.attempt import Attempt

logger = logging.getLogger(__name__)


def encode(data: DecisionData) -> bytes:
    """One framed line: the CRC-32 of the JSON, then the JSON (flywheel.jsonout: a lone
    surrogate in an answer survives as an escape; no newline inside, as JSON escapes
    them)."""
    values = dict(vars(data))  # shallow: the encoder walks the rest (asdict's copy costs 4x)
    values["attempts"] = [vars(a) for a in data.attempts]
    body = dumps(values, default=str)
    return b"%08x %s\n" % (zlib.crc32(body), body)


def unframed(line: bytes) -> bytes:
    """The JSON of a framed line; ValueError if the line is torn or not one of ours. A
    line of bare JSON (written before lines were framed) is taken as it is."""
    line = line.rstrip(b"\n")
    if line.startswith(b"{"):
        return line
    crc, _, body = line.partition(b" ")
    if len(crc) != 8 or not body or int(crc, 16) != zlib.crc32(body):
        raise ValueError("a torn or damaged line (its checksum does not match)")
    return body


def decode(line: bytes) -> DecisionData:
    values: dict[str, Any] = json.loads(unframed(line))
    values["request_id"] = uuid.UUID(values["request_id"])
    if values["session_id"] is not None:
        values["session_id"] = uuid.UUID(values["session_id"])
    values["attempts"] = tuple(Attempt(**a) for a in values["attempts"])
    return DecisionData(**values)


def lines(path: Path) -> Iterator[DecisionData]:
    """The decisions in a segment; a torn line (a machine crash or a full disk mid-write)
    is skipped, and the lines after it are read."""
    with path.open("rb") as file:
        for number, line in enumerate(file, start=1):
            try:
                yield decode(line)
            except (ValueError, TypeError, KeyError) as err:
                logger.warning("Spool %s line %d is unreadable, skipped: %s", path, number, err)

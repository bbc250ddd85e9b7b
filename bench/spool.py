"""What the decision spool costs an answer: one append per decision, on the event loop.

Prints p50/p99 of encoding a typical decision (five candidates, evidence, two
attempts, a 600-character answer) and of appending it to a spool segment
(the encoding plus one write call), and what an fsync of the segment costs
the spool's keeper thread (once a second, off the event loop). No database.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "flywheel.settings")
os.environ.setdefault("FLYWHEEL_VAR_DIR", str(Path(__file__).resolve().parent.parent / "var/bench"))

import django

django.setup()

from bench.common import summary  # noqa: E402
from routing.recording.decision import DecisionData  # noqa: E402
from routing.recording.spool import Spool, encode  # noqa: E402
from routing.selection.attempt import Attempt  # noqa: E402

N = 20_000


def typical() -> DecisionData:
    return DecisionData(
        request_id=uuid.uuid4(),
        tenant_id=1,
        session_id=uuid.uuid4(),
        question="Please review my pull request for the payment service refactor",
        outcome="fallback",
        intent="code-review",
        intent_confidence=0.92,
        intent_method="rules",
        # As routing.recording.compact packs them: the matched rules' ids, and a
        # candidate as [backend, flow, score, success, margin, typical ms, attempts,
        # expected seconds, generic].
        evidence={"intent": [11, 12]},
        backend_id=2,
        flow_id=7,
        score=0.81,
        candidates=[
            [i + 1, i + 3, round(0.8 - i / 10, 3), 0.97, 0.02, 640.0, 120, 2.5, False]
            for i in range(5)
        ],
        attempts=(
            Attempt(1, "b0", 3, "f0", ok=False, latency_ms=31.2, error_type="BackendHTTPError"),
            Attempt(2, "b1", 7, "f1", ok=True, latency_ms=212.5),
        ),
        timings={"classify_ms": 0.1, "route_ms": 0.05, "execute_ms": 243.7, "total_ms": 244.0},
        answer="x" * 600,
    )


def timed(call: object, n: int = N) -> list[float]:
    timings = []
    for _ in range(n):
        started = time.perf_counter()
        call()  # type: ignore[operator]
        timings.append((time.perf_counter() - started) * 1000)
    return timings


def main() -> None:
    data = typical()
    print(f"one decision, spooled: {len(encode(data))} bytes")
    print(f"{'encode, ms:':<40}{summary(timed(lambda: encode(data)))}")
    with tempfile.TemporaryDirectory(dir=os.environ["FLYWHEEL_VAR_DIR"]) as directory:
        spool = Spool(Path(directory))
        print(f"{'append (encode + write), ms:':<40}{summary(timed(lambda: spool.append(data)))}")
        syncs = []
        for _ in range(50):
            spool.append(data)
            started = time.perf_counter()
            spool.sync()
            syncs.append((time.perf_counter() - started) * 1000)
        print(f"{'fsync after one append (keeper), ms:':<40}{summary(syncs)}")


if __name__ == "__main__":
    main()

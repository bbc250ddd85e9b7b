"""What each written decision is counted as: /metrics' counters and one log line per decision."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from flywheel.metrics import (
    BACKEND_LATENCY,
    DECISIONS,
    FALLBACKS,
    NO_BACKEND,
    backend_labels,
    labelled,
)
from routing.models import (
    Outcome,
)
from routing.recording.decision import DecisionData
from routing.selection.attempt import Attempt

decisions_log = logging.getLogger("flywheel.decisions")  # one line per decision


def count(batch: Sequence[DecisionData]) -> None:
    """Count decisions, fallbacks and attempts for /metrics (flywheel/metrics.py), and log
    one line per decision (no question text: it is the user's)."""
    for data in batch:
        answered = next((a for a in reversed(data.attempts) if a.ok), None)
        winner = answered.backend if answered else "none"
        intent = data.intent or "none"
        total_ms = data.timings.get("total_ms", 0.0)
        decisions_log.info(
            "decision %s: %s (%s) -> %s, %s in %.0f ms",
            data.request_id,
            intent,
            data.intent_method or "none",
            winner,
            data.outcome,
            total_ms,
            extra={
                "request_id": str(data.request_id),
                "fields": {
                    "intent": intent,
                    "method": data.intent_method,
                    "backend": winner,
                    "outcome": data.outcome,
                    "attempts": len(data.attempts),
                    "total_ms": total_ms,
                    "error_type": data.error_type,
                },
            },
        )
        by = _labels(answered) if answered else NO_BACKEND
        labelled(DECISIONS, *by, intent, data.intent_method or "none", data.outcome).inc()
        if data.outcome == Outcome.FALLBACK:
            labelled(FALLBACKS, intent).inc()
        for attempt in data.attempts:
            result = "ok" if attempt.ok else "failed"
            labelled(BACKEND_LATENCY, *_labels(attempt), result).observe(attempt.latency_ms / 1000)


def _labels(attempt: Attempt) -> tuple[str, str, str]:
    return backend_labels(attempt.backend_id, attempt.backend_owner, attempt.backend)

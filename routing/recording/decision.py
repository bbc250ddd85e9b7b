"""The decision record: what one query did, as the writer, the spool and the store take it."""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from routing.recording.compact import pack_attempts
from routing.selection.attempt import Attempt

CLIPPED = "\n[… cut: {more} more characters]"


def clipped(text: str, limit: int) -> str:
    """``text`` if it is at most ``limit`` characters, else its start and a note of how
    much was cut, within ``limit`` characters (a limit too short for the note: the
    start alone)."""
    if len(text) <= limit:
        return text
    kept = limit - len(CLIPPED.format(more=len(text)))  # the widest the note can be
    if kept <= 0:
        return text[:limit]
    return text[:kept] + CLIPPED.format(more=len(text) - kept)


@dataclass(frozen=True)
class DecisionData:
    request_id: uuid.UUID
    tenant_id: int
    question: str
    outcome: str
    session_id: uuid.UUID | None = None
    intent: str = ""
    intent_confidence: float | None = None
    intent_method: str = ""
    query_type: str = ""
    query_type_confidence: float | None = None
    evidence: dict[str, Any] = field(default_factory=dict)
    routing_method: str = "auto"
    backend_id: int | None = None
    flow_id: int | None = None
    score: float | None = None
    candidates: list[Any] = field(default_factory=list)  # as routing.recording.compact packs them
    attempts: tuple[Attempt, ...] = ()
    error_type: str = ""
    error_message: str = ""
    timings: dict[str, float] = field(default_factory=dict)
    answer: str | None = None  # a turn is stored when there is an answer
    # When it was decided (seconds since the epoch): its row's created_at, chosen here
    # and not by the database, so that a decision written twice (replayed from the
    # spool after its first write had committed) is the same row both times, which
    # the table's unique key (request id, created_at) refuses (RoutingDecision).
    created_at: float = field(default_factory=time.time)
    # The question a one-shot query answered, when this decision continues it (its
    # session_id is that query's request id): {"question", "answer", "intent",
    # "backend_id", "flow_id", "decision_id", "created_at"}. The writer starts the
    # session with it as the first turn, unless the session exists already.
    opening: dict[str, Any] | None = None

    @property
    def conversation(self) -> uuid.UUID:
        """What this decision's writes are ordered by: its session, or (a one-shot
        query, which may be continued) its own request id, which the continuation names."""
        return self.session_id or self.request_id

    def decision_columns(self) -> dict[str, Any]:
        """The RoutingDecision row's columns (by attname), but its id."""
        return {
            "request_id": self.request_id,
            "tenant_id": self.tenant_id,
            "session_id": self.session_id,
            "question": self.question,
            "intent": self.intent,
            "intent_confidence": self.intent_confidence,
            "intent_method": self.intent_method,
            "query_type": self.query_type,
            "query_type_confidence": self.query_type_confidence,
            "evidence": self.evidence,
            "routing_method": self.routing_method,
            "backend_id": self.backend_id,
            "flow_id": self.flow_id,
            "score": self.score,
            "candidates": self.candidates,
            "fallback_chain": pack_attempts(self.attempts),
            "outcome": self.outcome,
            "error_type": self.error_type,
            "error_message": self.error_message,
            "corrected_intent": "",
            "corrected_at": None,
            "classify_ms": self.timings.get("classify_ms", 0),
            "route_ms": self.timings.get("route_ms", 0),
            "execute_ms": self.timings.get("execute_ms", 0),
            "total_ms": self.timings.get("total_ms", 0),
            "created_at": datetime.fromtimestamp(self.created_at, UTC),
        }

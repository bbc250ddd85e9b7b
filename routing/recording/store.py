"""The store: a batch of decisions, their attempts and turns, written in one transaction.

On PostgreSQL in one statement (batch_sql); elsewhere through the ORM. After the commit,
what routing learned of the backends the batch tried is shared, and what the LLM labelled is
kept as examples when the policy says so.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from django.db import InterfaceError, OperationalError, connection, transaction
from django.utils import timezone

from backends.models import Backend
from chatflows.models import Flow
from routing.models import (
    ExampleSource,
    Intent,
    IntentExample,
    PerformanceRecord,
    RoutingDecision,
    Session,
    Turn,
)
from routing.recording.batch_sql import decisions_insert, referred, storable
from routing.recording.decision import DecisionData
from routing.recording.performance import evidence_publish_soon
from routing.selection.learning import book
from routing.selection.state import policy_values

logger = logging.getLogger(__name__)


def _decision_row(data: DecisionData) -> RoutingDecision:
    return RoutingDecision(**storable(data.decision_columns()))


def decisions_record(batch: Sequence[DecisionData], *, performance_window: int = 10) -> None:
    """Store a batch of decisions with their attempts and turns, in one transaction.

    A busy process writes many decisions per round trip this way; sessions
    are created with their first decision. The evidence of every backend
    tried is folded again and shared once per batch, after the commit. Raises
    the database's error only: once it returns or raises, the batch is committed
    entirely or not at all.
    """
    with transaction.atomic():
        if connection.vendor == "postgresql":
            decisions_insert(batch)  # one statement, unpacked by PostgreSQL (batch_sql)
        else:
            _orm_insert(batch)
    _share_performance(batch, performance_window)
    _learn_from_llm(batch)


def _share_performance(batch: Sequence[DecisionData], window: int) -> None:
    """Publish again the evidence of the backends the batch tried: one read and one
    cache write for all of them. The rows are committed by now: a failure here (the
    cache down) is logged and never raised, so nobody writes the batch again; the next
    batch, or beat's republish, shares them later. This process's book of evidence
    counts its own attempts until a publication folded after now holds them."""
    touched = {a.backend_id for d in batch for a in d.attempts if a.measured}
    if not touched:
        return
    book.stored(
        (
            ((a.backend_id, a.flow_id, d.intent), a.ended_at)
            for d in batch
            for a in d.attempts
            if a.measured and a.flow_id is not None and a.ended_at
        ),
        time.time(),
    )
    try:
        evidence_publish_soon(touched, window)
    except Exception as err:  # the decisions are stored; only routing's memory is late
        logger.warning(
            "Decisions stored, but the evidence of backends %s could not be shared "
            "(%s: %s); the next batch or beat's republish will.",
            ", ".join(str(b) for b in sorted(touched)),
            type(err).__name__,
            err,
        )


def _learn_from_llm(batch: Sequence[DecisionData]) -> None:
    """With the policy's learn_from_llm on, keep what the LLM labelled as examples (beat's
    minutely check retrains). After the commit: a failure is logged, never raised."""
    labelled = [d for d in batch if d.intent_method == "llm" and d.intent]
    if not labelled:
        return
    try:
        if not policy_values().learn_from_llm:
            return
        intents = dict(Intent.objects.filter(enabled=True).values_list("slug", "pk"))
        IntentExample.objects.bulk_create(
            [
                IntentExample(
                    intent_id=intents[d.intent],
                    text=storable(d.question),
                    source=ExampleSource.LLM,
                )
                for d in labelled
                if d.intent in intents
            ],
            ignore_conflicts=True,
        )
    except Exception as err:  # the decisions are stored; an example less
        logger.warning("LLM labels not kept as examples (%s: %s)", type(err).__name__, err)


def _orm_insert(batch: Sequence[DecisionData]) -> None:
    """The same rows as batch_sql.decisions_insert (text made storable), through the ORM."""
    live_backends, live_flows = _live_references(batch)

    def backend(backend_id: int | None) -> int | None:
        return backend_id if backend_id in live_backends else None

    def flow(flow_id: int | None) -> int | None:
        return flow_id if flow_id in live_flows else None

    sessions = {d.session_id: d.tenant_id for d in batch if d.session_id is not None}
    there = set(Session.objects.filter(pk__in=sessions).values_list("pk", flat=True))
    # New sessions are created; known ones get their updated_at moved on.
    Session.objects.bulk_create(
        [Session(pk=key, tenant_id=tenant) for key, tenant in sessions.items()],
        update_conflicts=True,
        unique_fields=["id"],
        update_fields=["updated_at"],
    )
    stored = set(
        RoutingDecision.objects.filter(request_id__in=[d.request_id for d in batch]).values_list(
            "request_id", flat=True
        )
    )
    batch = [d for d in batch if d.request_id not in stored]  # replayed: written already
    rows = [_decision_row(d) for d in batch]
    for row in rows:
        row.backend_id, row.flow_id = backend(row.backend_id), flow(row.flow_id)
    decisions = RoutingDecision.objects.bulk_create(rows)
    written = timezone.now()
    PerformanceRecord.objects.bulk_create(
        PerformanceRecord(
            backend_id=a.backend_id,
            flow_id=flow(a.flow_id),
            decision=decision,
            intent=storable(data.intent),
            latency_ms=a.latency_ms,
            success=a.ok,
            error_type=storable(a.error_type),
            prompt_tokens=a.prompt_tokens,
            completion_tokens=a.completion_tokens,
            total_tokens=a.total_tokens,
            cost=a.cost,
            created_at=datetime.fromtimestamp(a.ended_at, UTC) if a.ended_at else written,
        )
        for data, decision in zip(batch, decisions, strict=True)
        for a in data.attempts
        # records of a deleted backend go with it; one the budget cut short says nothing
        if a.backend_id in live_backends and a.measured
    )
    openings: dict[Any, Turn] = {}  # the one-shot question a new session continues
    for data in batch:
        opening, session = data.opening, data.session_id
        if opening and session is not None and session not in there and session not in openings:
            openings[session] = Turn(
                session_id=session,
                question=storable(opening["question"]),
                answer=storable(opening["answer"]),
                intent=storable(opening["intent"]),
                backend_id=backend(opening["backend_id"]),
                flow_id=flow(opening["flow_id"]),
                decision_id=opening["decision_id"],
                created_at=datetime.fromtimestamp(opening["created_at"], UTC),
            )
    Turn.objects.bulk_create(openings.values())
    Turn.objects.bulk_create(
        Turn(
            session_id=data.session_id,
            question=storable(data.question),
            answer=storable(data.answer),
            intent=storable(data.intent),
            backend_id=backend(data.backend_id),
            flow_id=flow(data.flow_id),
            decision=decision,
        )
        for data, decision in zip(batch, decisions, strict=True)
        if data.session_id is not None and data.answer is not None
    )


def _live_references(batch: Sequence[DecisionData]) -> tuple[set[int], set[int]]:
    """The backends and flows the batch names that still exist (one may have been
    deleted while its query was in flight)."""
    backend_ids, flow_ids = referred(batch)
    return (
        set(Backend.objects.filter(pk__in=backend_ids - {None}).values_list("pk", flat=True)),
        set(Flow.objects.filter(pk__in=flow_ids - {None}).values_list("pk", flat=True)),
    )


# The database is unreachable (down, restarting, its pool exhausted): retry, keep.
DATABASE_DOWN = (OperationalError, InterfaceError)


# SQLSTATEs of an unreachable server: connection exceptions, and the server shutting down.
_UNREACHABLE_STATES = ("08", "57P01", "57P02", "57P03")


def database_down(err: BaseException) -> bool:
    """Whether ``err`` says the database cannot be reached (retry the write, keep it
    spooled) rather than that it refused this write: a deadlock, a timeout or a limit is
    an OperationalError too, and retrying it forever would wedge the writer."""
    if isinstance(err, InterfaceError):
        return True
    if not isinstance(err, OperationalError):
        return False
    state = getattr(err.__cause__, "sqlstate", None)  # None: no server answered at all
    return state is None or state.startswith(_UNREACHABLE_STATES)

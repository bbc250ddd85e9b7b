"""Writing down what a query did: one decision, its attempts, the session turn.

Everything for one query is written in one transaction, so a failure half-way
leaves no half-written rows; then the performance aggregates of the touched
backend + intent pairs are refreshed for routing in every process.
"""

from __future__ import annotations

import hashlib
import uuid
from dataclasses import dataclass, field
from typing import Any

from django.core.cache import cache
from django.db import transaction
from django.db.models import Avg, Count, Q

from analytics.models import PerformanceRecord, RoutingDecision
from routing.execution import Attempt
from routing.models import Session, Turn
from routing.scoring import Performance
from routing.state import publish_performance

ANSWER_CACHE_KEY = "flywheel:answer:{tenant}:{intent}:{digest}"


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
    routing_method: str = "auto"
    backend_id: int | None = None
    flow_id: int | None = None
    score: float | None = None
    candidates: list[dict[str, Any]] = field(default_factory=list)
    attempts: tuple[Attempt, ...] = ()
    error_type: str = ""
    timings: dict[str, float] = field(default_factory=dict)
    answer: str | None = None  # a turn is stored when there is an answer


def decision_record(data: DecisionData, *, performance_window: int = 10) -> RoutingDecision:
    """Store the decision, one PerformanceRecord per attempt and the session turn."""
    with transaction.atomic():
        decision = RoutingDecision.objects.create(
            request_id=data.request_id,
            tenant_id=data.tenant_id,
            session_id=data.session_id,
            question=data.question,
            intent=data.intent,
            intent_confidence=data.intent_confidence,
            intent_method=data.intent_method,
            query_type=data.query_type,
            query_type_confidence=data.query_type_confidence,
            routing_method=data.routing_method,
            backend_id=data.backend_id,
            flow_id=data.flow_id,
            score=data.score,
            candidates=data.candidates,
            fallback_chain=[a.as_dict() for a in data.attempts],
            outcome=data.outcome,
            error_type=data.error_type,
            classify_ms=data.timings.get("classify_ms", 0),
            route_ms=data.timings.get("route_ms", 0),
            execute_ms=data.timings.get("execute_ms", 0),
            total_ms=data.timings.get("total_ms", 0),
        )
        PerformanceRecord.objects.bulk_create(
            PerformanceRecord(
                backend_id=a.backend_id,
                flow_id=a.flow_id,
                decision=decision,
                intent=data.intent,
                latency_ms=a.latency_ms,
                success=a.ok,
                error_type=a.error_type,
            )
            for a in data.attempts
        )
        if data.session_id is not None and data.answer is not None:
            Turn.objects.create(
                session_id=data.session_id,
                question=data.question,
                answer=data.answer,
                intent=data.intent,
                backend_id=data.backend_id,
                flow_id=data.flow_id,
            )
            Session.objects.filter(pk=data.session_id).update(updated_at=decision.created_at)
    for backend_id in {a.backend_id for a in data.attempts}:
        publish_performance(
            backend_id, data.intent, performance_of(backend_id, data.intent, performance_window)
        )
    return decision


def performance_of(backend_id: int, intent: str, window: int) -> Performance:
    """Success rate and mean latency over the last ``window`` attempts (one indexed read)."""
    recent = PerformanceRecord.objects.filter(backend_id=backend_id, intent=intent).order_by(
        "-created_at"
    )[:window]
    stats = PerformanceRecord.objects.filter(pk__in=recent.values("pk")).aggregate(
        n=Count("pk"), ok=Count("pk", filter=Q(success=True)), latency=Avg("latency_ms")
    )
    n = stats["n"] or 0
    return Performance(
        attempts=n,
        success_rate=(stats["ok"] / n) if n else 0.0,
        avg_latency_ms=float(stats["latency"] or 0.0),
    )


def _answer_key(tenant_id: int, intent: str, question: str) -> str:
    normalised = " ".join(question.lower().split())
    digest = hashlib.sha256(normalised.encode()).hexdigest()[:32]
    return ANSWER_CACHE_KEY.format(tenant=tenant_id, intent=intent, digest=digest)


def answer_remember(
    tenant_id: int, intent: str, question: str, answer: dict[str, Any], ttl: int
) -> None:
    cache.set(_answer_key(tenant_id, intent, question), answer, timeout=ttl)


def answer_recall(tenant_id: int, intent: str, question: str) -> dict[str, Any] | None:
    """A fresh earlier answer to the same question and intent, for when every backend is down."""
    found = cache.get(_answer_key(tenant_id, intent, question))
    return found if isinstance(found, dict) else None

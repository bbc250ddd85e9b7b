"""How each turn of a conversation was routed (seed 002's visualisation), and the
story of one decision as the trace page tells it.

Both read what routing recorded: the decision (intent, evidence, candidates,
fallback chain, outcome, timings) and the turn that holds its answer.
"""

from __future__ import annotations

import uuid
from typing import Any

from analytics.access import Scope
from analytics.retention import decision_missing
from analytics.selectors import decisions_for
from flywheel.errors import NotFoundError
from routing.answering.query import trace_path
from routing.answering.sessions import session_key
from routing.models import ANSWERED_OUTCOMES, Outcome, RoutingDecision, Session, with_request_id
from routing.recording.compact import Names, Read, names_for, read
from routing.recording.own_writes import reads_own_writes
from routing.selection.words import why


def visualization_path(session_id: object) -> str:
    return f"/v/{session_id}/"


def answered_by(decision: RoutingDecision, kept: Read | None = None) -> dict[str, Any] | None:
    """Who answered: the backend and flow, the cache (and whose answer it kept), or
    Flywheel itself from the conversation; None when nothing answered. An abandoned
    answer (its client had gone) still names who produced it. A backend or flow deleted
    since is named as the decision ``kept`` (routing.recording.compact.read) names it."""
    kept = kept or read(decision)
    evidence, chain = kept.evidence, kept.fallback_chain
    if decision.outcome not in (*ANSWERED_OUTCOMES, Outcome.ABANDONED):
        return None
    if Outcome.CACHED in (decision.outcome, evidence.get("answered_as")):
        source = evidence.get("cached_from") or {}
        return {
            "source": "cache",
            "backend": source.get("backend"),
            "flow": source.get("flow"),
        }
    answered = next((a for a in reversed(chain) if a.get("ok")), {})
    if decision.backend_id is None and not answered:
        return {"source": "flywheel", "backend": None, "flow": None}
    return {
        "source": "backend",
        "backend": decision.backend.name if decision.backend else answered.get("backend"),
        "flow": decision.flow.name if decision.flow else answered.get("flow"),
    }


def _answer(decision: RoutingDecision) -> str | None:
    try:
        return decision.turn.answer
    except RoutingDecision.turn.RelatedObjectDoesNotExist:
        return None


def decision_story(decision: RoutingDecision, names: Names | None = None) -> dict[str, Any]:
    """One decision as a person follows it: question → intent → candidates → chain →
    answer (or error). Needs the decision with its backend, flow and turn; ``names``
    from routing.recording.compact.names_for over the decisions shown (by default, this
    one's)."""
    kept = read(decision, names)
    evidence = kept.evidence
    return {
        "request_id": str(decision.request_id),
        "created_at": decision.created_at,
        "question": decision.question,
        "intent": {
            "intent": decision.intent,
            "method": decision.intent_method,
            "confidence": decision.intent_confidence,
            "evidence": {
                "summary": evidence.get("intent_summary") or "",  # kept from wave 3 on
                "raw": list(evidence.get("intent") or []),
            },
        },
        "query_type": decision.query_type or None,
        "candidates": kept.candidates,
        "why": evidence.get("why") or (why(kept.candidates) if kept.candidates else ""),
        "fallback_chain": kept.fallback_chain,
        "outcome": decision.outcome,
        "answered_by": answered_by(decision, kept),
        "answer": _answer(decision),
        "error": (
            {"type": decision.error_type, "message": decision.error_message}
            if decision.error_type
            else None
        ),
        "timings": {
            "classify_ms": decision.classify_ms,
            "route_ms": decision.route_ms,
            "execute_ms": decision.execute_ms,
            "total_ms": decision.total_ms,
        },
        "trace_url": trace_path(decision.request_id),
    }


def decision_for(scope: Scope, request_id: uuid.UUID) -> RoutingDecision:
    """A decision the scope may read, with what its story needs. Raises NotFoundError."""
    decisions = decisions_for(scope.tenant).select_related("tenant", "turn")
    decision = with_request_id(decisions, request_id).first()
    if decision is None:
        raise decision_missing(request_id)
    return decision


@reads_own_writes
def session_visualization(*, scope: Scope, session_id: object) -> dict[str, Any]:
    """Every decision of a session the scope may read, oldest first, each as its story.
    The id of a one-shot question (its request id) shows that question, and the
    session that continued it if it was.

    Raises ValidationError for an id that is not a UUID, NotFoundError for a session
    the scope cannot see (another tenant's is the same as none).
    """
    key = session_key(str(session_id), field="session_id")
    sessions = Session.objects.select_related("tenant")
    decisions = RoutingDecision.objects.select_related("tenant", "backend", "flow", "turn")
    if scope.tenant is not None:
        sessions = sessions.filter(tenant=scope.tenant)
        decisions = decisions.filter(tenant=scope.tenant)
    session = sessions.filter(pk=key).first()
    one_shot = list(with_request_id(decisions.filter(session__isnull=True), key))
    if session is None and not one_shot:
        raise NotFoundError(f"No session {key}.", details={"session_id": str(key)})
    kept = list(decisions.filter(session=session).order_by("created_at", "id")) if session else []
    found = one_shot + kept
    if session is not None:
        tenant, created, updated = session.tenant, session.created_at, session.updated_at
    else:
        tenant, created, updated = one_shot[0].tenant, one_shot[0].created_at, None
    names = names_for(found)
    return {
        "session_id": str(key),
        "tenant": tenant.slug,
        "created_at": found[0].created_at if found else created,
        "updated_at": updated or created,
        "visualization_url": visualization_path(key),
        "turns": [decision_story(d, names) for d in found],
    }

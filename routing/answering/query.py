"""One query on its way through answering: what it asked, what was found, and its decision."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings

from flywheel import ids
from flywheel.models import Tenant
from routing.answering.query_input import QueryRequest
from routing.answering.sessions import (
    PastTurn,
)
from routing.classification.cascade import IntentResult, Turn
from routing.classification.query_type import QueryTypeDecision
from routing.models import ANSWERED_OUTCOMES, Outcome
from routing.recording.compact import pack_candidates, pack_rules, summary_said_again
from routing.recording.decision import DecisionData, clipped
from routing.selection.planning import Plan
from routing.selection.words import why

# Tasks that must finish even if the client that started them goes away.
in_flight: set[asyncio.Task[Any]] = set()


def trace_path(request_id: uuid.UUID | str) -> str:
    return f"/decisions/{request_id}"


def session_path(session_id: uuid.UUID | str) -> str:
    """The session's diagram page (seed 002's visualisation)."""
    return f"/v/{session_id}/"


@dataclass(frozen=True)
class CachedFrom:
    """The backend and flow whose answer the cache served: names, and ids where the
    cache kept them (an answer cached by an earlier version kept names)."""

    backend: str
    flow: str
    ids: tuple[int, int] | None = None

    def names(self) -> dict[str, str]:
        return {"backend": self.backend, "flow": self.flow}

    def kept(self) -> list[int] | dict[str, str]:
        """As the decision keeps it (routing.recording.compact): ids, else names."""
        return list(self.ids) if self.ids is not None else self.names()


@dataclass
class Query:
    """One query on its way through routing."""

    request: QueryRequest
    tenant: Tenant
    request_id: uuid.UUID = field(default_factory=ids.uuid7)
    started: float = field(default_factory=time.perf_counter)
    session_id: uuid.UUID | None = None
    # A question without a session id is one-shot: no session is kept for it unless it
    # is continued (its session id, returned to the caller, is its request id). A door
    # whose people hold conversations (the chat page) keeps one from the first question.
    keep_session: bool = False
    opening: dict[str, Any] | None = None  # the one-shot question this one continues
    history: list[PastTurn] = field(default_factory=list)
    intent: IntentResult | None = None
    query_type: QueryTypeDecision | None = None
    plan: Plan | None = None
    backend_question: str = ""
    local_answer: str | None = None
    cached_from: CachedFrom | None = None  # the answer came from the cache: whose it was
    client_gone: bool = False  # the caller stopped waiting before the answer was ready
    timings: dict[str, float] = field(default_factory=dict)
    recorded: bool = False

    @property
    def classified(self) -> IntentResult:
        if self.intent is None:
            raise RuntimeError("the query has not been classified yet")
        return self.intent

    @property
    def planned(self) -> Plan:
        if self.plan is None:
            raise RuntimeError("the query has no plan (it was answered locally)")
        return self.plan

    def kept_session(self, answer: str | None) -> bool:
        """Whether the decision belongs to a session: one the caller named, or one kept
        from this first question once it has an answer (a session whose id its caller
        never got would be a conversation nobody can continue or look up)."""
        if self.request.session_id is not None:
            return True
        return self.keep_session and answer is not None

    def mark(self, name: str) -> None:
        elapsed = (time.perf_counter() - self.started) * 1000
        self.timings[name] = round(elapsed - sum(self.timings.values()), 3)

    def evidence(self) -> dict[str, Any]:
        """Why the intent and query type are what they are, as the decision keeps it
        (routing.recording.compact): the matched rules by id, the first candidate by
        its place, and no ``why``, which is said again from the candidates (nor the
        rules' summary, said again from the question and the rules)."""
        found: dict[str, Any] = {}
        if self.intent is not None:
            matched = pack_rules(self.intent.evidence, self.intent.rule_ids)
            if matched:
                found["intent"] = matched
            if not summary_said_again(self.intent.method, self.intent.rule_ids):
                found["intent_summary"] = self.intent.summary
        if self.query_type is not None:
            qt = self.query_type
            found["query_type"] = {
                "reasoning": qt.reasoning,
                "global_weight": qt.global_weight,
                "local_weight": qt.local_weight,
                "method": qt.method,
                "evidence": {
                    scope: pack_rules(patterns, qt.rule_ids.get(scope, ()))
                    for scope, patterns in qt.evidence.items()
                },
            }
        if self.cached_from is not None:
            found["cached_from"] = self.cached_from.kept()
        if self.plan is not None and self.plan.explored:
            found["explored"] = True  # the first candidate's backend
        if self.plan is not None and self.plan.arm:
            found["arm"] = self.plan.arm  # its A/B split's arm (the analytics page compares)
        first = self.plan.candidates[0] if self.plan is not None and self.plan.candidates else None
        if first is not None and first.trial and first.estimate.retry_due:
            found["retried"] = True  # the first candidate's backend was failing: tried again
        return found

    def why(self) -> str | None:
        """Why the first candidate was tried first, in words (None: nothing was planned)."""
        if self.plan is None or not self.plan.candidates:
            return None
        intent = self.intent.intent if self.intent else ""
        candidates = [c.as_dict() for c in self.plan.candidates]
        return why(candidates, explored=self.plan.explored, intent=intent)

    def decision(self, outcome: str, **fields: Any) -> DecisionData:
        """The decision to record. An answer ready after its caller had gone is
        ``abandoned``: what the client got, not what routing achieved (the evidence
        keeps that, as ``answered_as``). The answer is kept to
        FLYWHEEL_MAX_STORED_ANSWER_CHARS; the caller gets it whole."""
        evidence = self.evidence()
        if self.client_gone and outcome in ANSWERED_OUTCOMES:
            evidence["answered_as"] = outcome
            outcome = Outcome.ABANDONED
        intent = self.intent
        qt = self.query_type
        self.timings.setdefault("total_ms", round((time.perf_counter() - self.started) * 1000, 3))
        answer = fields.get("answer")
        if answer is not None and len(answer) > settings.MAX_STORED_ANSWER_CHARS:
            fields["answer"] = clipped(answer, settings.MAX_STORED_ANSWER_CHARS)  # as kept
        return DecisionData(
            request_id=self.request_id,
            tenant_id=self.tenant.pk,
            question=self.request.question,
            outcome=outcome,
            session_id=self.session_id if self.kept_session(answer) else None,
            intent=intent.intent if intent else "",
            intent_confidence=intent.confidence if intent else None,
            intent_method=intent.method if intent else "",
            query_type=qt.query_type if qt else "",
            query_type_confidence=qt.confidence if qt else None,
            evidence=evidence,
            routing_method=self.plan.routing_method
            if self.plan
            else requested_method(self.request),
            candidates=pack_candidates(self.plan.candidates) if self.plan else [],
            timings=dict(self.timings),
            opening=self.opening,
            **fields,
        )


def requested_method(request: QueryRequest) -> str:
    return "auto" if request.backend.lower() == "auto" and request.flow is None else "explicit"


def as_turns(history: Sequence[PastTurn]) -> list[Turn]:
    return [Turn(t.question, t.intent, t.answer) for t in history]

"""How a query ends: exactly one decision recorded, and the answer (or the error) built.

Every query that reaches routing writes exactly one RoutingDecision, whatever happens:
an answer, a fallback, a cached answer, a refusal, a failure of every backend, or a bug
in Flywheel itself.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import replace
from typing import Any

from django.conf import settings
from django.db import DatabaseError

from backends.adapters import adapter_class
from backends.adapters.base import ExecutionResult
from backends.adapters.traits import unapplied
from flywheel.asyncdb import db
from flywheel.errors import (
    DATABASE_UNAVAILABLE,
    ApplicationError,
    UnavailableError,
    database_unavailable,
    internal_error_body,
)
from routing.answering.query import CachedFrom, Query, in_flight, session_path, trace_path
from routing.answering.sessions import (
    PastTurn,
    session_remember,
)
from routing.errors import AllBackendsFailedError
from routing.recording.answers import CachedAnswer, answer_recall
from routing.recording.compact import names_of
from routing.recording.decision import DecisionData
from routing.recording.writer import record_kept, record_later
from routing.selection.attempt import Attempt
from routing.selection.breaker import breaker_apply_later, breaker_note
from routing.selection.scoring import Candidate
from routing.selection.state import RoutingState, now

logger = logging.getLogger(__name__)


async def record(
    query: Query, data: DecisionData, state: RoutingState, answer: CachedAnswer | None = None
) -> None:
    """Write the rows (and cache the answer) behind the answer; remember the turn for
    the conversation before the answer goes out. An answer's decision is kept before it
    goes out (record_kept: it raises UnavailableError if it cannot be); a decision
    without an answer is written behind the error it ends with."""
    window = state.policy.performance_window
    if data.answer is None:
        record_later(data, performance_window=window, answer=answer)
    else:
        try:
            await record_kept(data, performance_window=window, answer=answer)
        except UnavailableError as err:  # refused: the decision says so once it can be written
            refused = replace(
                data, outcome="failed", answer=None, error_type=err.type, error_message=err.message
            )
            record_later(refused, performance_window=window)
            query.recorded = True
            raise
    query.recorded = True
    if data.session_id is not None and data.answer is not None:
        await session_remember(
            tenant_id=query.tenant.pk,
            session_id=data.session_id,
            recent=query.history,
            turn=PastTurn(data.question, data.answer, data.intent, data.backend_id, data.flow_id),
            alone=len(in_flight) <= 1,  # this query is the only one in flight
        )


@asynccontextmanager
async def recorded(query: Query, state: RoutingState) -> AsyncIterator[None]:
    """Whatever ends the query, it leaves exactly one decision.

    Outcomes recorded on the way (an answer, a failure of every backend)
    stand; an error raised before any was recorded becomes a "rejected"
    decision (bad session, unknown intent or backend, no flow) or, for a bug
    in Flywheel, a "failed" one. The error is raised on.
    """
    try:
        yield
    except ApplicationError as err:
        err.details.setdefault("request_id", str(query.request_id))
        if not query.recorded:
            await record(
                query,
                query.decision("rejected", error_type=err.type, error_message=err.message),
                state,
            )
        raise
    except DATABASE_UNAVAILABLE as err:  # an outage, not a bug: 503, and retry
        logger.warning("Query %s: the database fails (%s)", query.request_id, err)
        unavailable = database_unavailable()
        if not query.recorded:
            await record(
                query,
                query.decision(
                    "failed", error_type=unavailable.type, error_message=unavailable.message
                ),
                state,
            )
        raise unavailable from err
    except Exception:
        logger.exception("Query %s failed inside Flywheel", query.request_id)
        if not query.recorded:
            message = internal_error_body()["error"]["message"]
            await record(
                query,
                query.decision("failed", error_type="InternalError", error_message=message),
                state,
            )
        raise
    except asyncio.CancelledError:  # the server stopped it (its shutdown timeout ran out)
        if not query.recorded:  # no await here: this task is being cancelled
            record_later(
                query.decision(
                    "failed",
                    error_type="Cancelled",
                    error_message="The server stopped before the answer was complete.",
                ),
                performance_window=state.policy.performance_window,
            )
            query.recorded = True
        raise


def fell_back(attempts: Sequence[Attempt]) -> bool:
    """Whether a later attempt was needed: the first did not answer (when it did, a hedge
    it beat was cancelled, no fallback)."""
    return len(attempts) > 1 and not attempts[0].ok


def _routing_block(
    query: Query,
    *,
    winner: Candidate | None,
    attempts: Sequence[Attempt],
    cached: bool = False,
) -> dict[str, Any]:
    intent = query.classified
    block = {
        "intent": intent.intent,
        "intent_confidence": intent.confidence,
        "method": intent.method,
        "evidence": intent.evidence_shown(),
        "query_type": query.query_type.as_dict() if query.query_type else None,
        "routing_method": query.plan.routing_method if query.plan else "local",
        "why": query.why(),
        "backend": winner.backend.name if winner else None,
        "flow": winner.flow.name if winner else None,
        "score": winner.score if winner else None,
        "candidates": [c.as_dict() for c in query.plan.candidates] if query.plan else [],
        "fallback_used": fell_back(attempts) or cached,
        "fallback_chain": [a.as_dict() for a in attempts],
        "cached": cached,
        "timings": dict(query.timings),
    }
    if query.plan is not None and query.plan.arm:  # only then: most questions have no split
        block["arm"] = query.plan.arm
    return block


def usage_of(attempts: Sequence[Attempt]) -> dict[str, int | None] | None:
    """The tokens of the attempt that answered, if its backend reported any."""
    answered = attempts[-1] if attempts and attempts[-1].ok else None
    if answered is None or (answered.prompt_tokens, answered.completion_tokens) == (None, None):
        return None
    total = answered.total_tokens
    if total is None and None not in (answered.prompt_tokens, answered.completion_tokens):
        total = (answered.prompt_tokens or 0) + (answered.completion_tokens or 0)
    return {
        "prompt_tokens": answered.prompt_tokens,
        "completion_tokens": answered.completion_tokens,
        "total_tokens": total,
    }


def unapplied_warnings(parameters: Mapping[str, Any], winner: Candidate) -> list[str]:
    """What of the caller's temperature and max_tokens the flow that answered could not
    take (none of its nodes takes it: backends/adapters/traits.py), in words."""
    reason = adapter_class(winner.backend.kind).untuned_reason
    return [
        f"{parameter} was not applied: flow {winner.flow.name!r} on {winner.backend.name} {reason}."
        for parameter in unapplied(parameters, winner.flow.tunable)
    ]


def _response(
    query: Query,
    answer: str,
    routing: dict[str, Any],
    attempts: Sequence[Attempt] = (),
    backend_ids: Mapping[str, Any] | None = None,
    winner: Candidate | None = None,
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "answer": answer,
        "session_id": str(query.session_id),
        "request_id": str(query.request_id),
    }
    warnings = unapplied_warnings(query.request.parameters, winner) if winner else []
    if warnings:  # only then: a parameter the flow could not take is never dropped unsaid
        body["warnings"] = warnings
    usage = usage_of(attempts)
    if usage is not None:  # only then: most flows report no tokens
        body["usage"] = usage
    if backend_ids:  # only then: Flowise gives its message ids, Langflow none
        body["backend_ids"] = {k: str(v) for k, v in backend_ids.items()}
    if query.request.include_routing_metadata:
        body["routing"] = routing
    body["trace_url"] = trace_path(query.request_id)
    body["session_url"] = session_path(body["session_id"])
    return body


def _why_no_answer(*, attempts: bool, spent: bool, budget: float) -> str:
    """The end of the message of a query nothing answered."""
    if spent:
        return f" within the query's time budget of {budget:g} s."
    return "." if attempts else ": every backend with a matching flow is down."


def _log_failed_attempts(query: Query, attempts: Sequence[Attempt]) -> None:
    """One line per failed attempt, with what an operator looks it up by. The error
    text is the one the decision keeps (redacted of what a backend echoed)."""
    for attempt in attempts:
        if not attempt.ok:
            logger.warning(
                "Query %s: %s / %s failed (%s): %s",
                query.request_id,
                attempt.backend,
                attempt.flow,
                attempt.error_type,
                attempt.error,
            )


async def conclude(
    query: Query,
    state: RoutingState,
    *,
    result: ExecutionResult | None,
    winner: Candidate | None,
    attempts: Sequence[Attempt],
    may_use_cache: bool = True,
) -> dict[str, Any]:
    """Record the outcome and build the answer, or raise with the chain.

    With no answer, a fresh cached one may stand in, unless ``may_use_cache``
    is off (part of a streamed answer has already gone out).
    """
    intent = query.classified.intent
    query.timings["total_ms"] = round((time.perf_counter() - query.started) * 1000, 3)
    _log_failed_attempts(query, attempts)
    breaker_apply_later(
        breaker_note(attempts, state, now(), tenant_id=query.tenant.pk, intent=intent)
    )
    if result is not None and winner is not None:
        outcome = "fallback" if fell_back(attempts) else "success"
        await record(
            query,
            query.decision(
                outcome,
                backend_id=winner.backend.id,
                flow_id=winner.flow.id,
                score=winner.score,
                attempts=tuple(attempts),
                answer=result.text,
            ),
            state,
            _cached_answer(query, intent, result.text, winner, state),
        )
        routing = _routing_block(query, winner=winner, attempts=attempts)
        return _response(query, result.text, routing, attempts, result.metadata, winner)
    cached = (
        answer_recall(query.tenant.pk, intent, query.backend_question) if may_use_cache else None
    )
    if cached is not None:
        query.cached_from = await _cached_source(cached, state)
        await record(
            query,
            query.decision("cached", attempts=tuple(attempts), answer=cached["answer"]),
            state,
        )
        routing = _routing_block(query, winner=None, attempts=attempts, cached=True)
        routing["cached_from"] = query.cached_from.names()
        return _response(query, cached["answer"], routing)
    budget = state.policy.query_budget_seconds
    spent = time.perf_counter() - query.started >= budget
    failure = AllBackendsFailedError(
        f"No backend could answer the {intent!r} question"
        + _why_no_answer(attempts=bool(attempts), spent=spent, budget=budget),
        details={
            "request_id": str(query.request_id),
            "intent": intent,
            "fallback_chain": [a.as_dict() for a in attempts],
        },
    )
    await record(
        query,
        query.decision(
            "failed",
            attempts=tuple(attempts),
            # The error the caller got: each attempt's own is in the chain.
            error_type=failure.type,
            error_message=failure.message,
        ),
        state,
    )
    raise failure


def _cached_answer(
    query: Query, intent: str, text: str, winner: Candidate, state: RoutingState
) -> CachedAnswer | None:
    """The answer to keep for the same question while backends are down, unless it is
    longer than an answer is kept (FLYWHEEL_MAX_STORED_ANSWER_CHARS): a cut answer must
    not stand in for a whole one, and a tenant must not fill the cache with its backend's
    longest answers."""
    if len(text) > settings.MAX_STORED_ANSWER_CHARS:
        return None
    return CachedAnswer(
        tenant_id=query.tenant.pk,
        intent=intent,
        question=query.backend_question,
        value={"answer": text, "backend": winner.backend.id, "flow": winner.flow.id},
        ttl=state.policy.answer_cache_ttl_seconds,
    )


async def _cached_source(cached: dict[str, Any], state: RoutingState) -> CachedFrom:
    """Whose answer the cache kept: its backend's and flow's ids (kept from then on by
    id), named as the routing state names them now, or as their rows do (a backend
    disabled since is not in the state); kept by name before."""
    backend, flow = cached.get("backend"), cached.get("flow")
    if not isinstance(backend, int) or not isinstance(flow, int):
        return CachedFrom(str(backend), str(flow))
    entry = next((b for b in state.backends if b.id == backend), None)
    flow_name = next((f.name for f in entry.flows if f.id == flow), None) if entry else None
    if entry is not None and flow_name is not None:
        return CachedFrom(entry.name, flow_name, (backend, flow))
    try:
        names = await db(names_of)([backend], [flow])
    except DatabaseError:  # the database is out: named by id
        return CachedFrom(f"backend #{backend}", f"flow #{flow}", (backend, flow))
    return CachedFrom(names.backend(backend)[0], names.flow(flow)[0], (backend, flow))


async def answered_locally(query: Query, state: RoutingState, answer: str) -> dict[str, Any]:
    """Record and build an answer Flywheel gave itself (from the conversation)."""
    query.timings["total_ms"] = round((time.perf_counter() - query.started) * 1000, 3)
    await record(query, query.decision("success", answer=answer), state)
    return _response(query, answer, _routing_block(query, winner=None, attempts=()))

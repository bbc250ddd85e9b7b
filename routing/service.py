"""The universal query: the one code path that answers a question.

Every door (REST and the CLI; the MCP server and web pages are built on the
same calls) uses :func:`answer_question` (or :func:`stream_answer`, or the dry
run :func:`route_question`). Every query that reaches routing writes exactly
one RoutingDecision, whatever happens: an answer, a fallback, a refusal, a
failure of every backend, or a bug in Flywheel itself.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import AsyncGenerator, AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from django.core.exceptions import SuspiciousOperation
from django.http import HttpRequest

from backends.adapters import kinds
from backends.adapters.base import Exchange, ExecutionResult
from chatflows.lifecycle import resolve_flow
from flywheel import ids, logs
from flywheel.asyncdb import db
from flywheel.errors import (
    DATABASE_UNAVAILABLE,
    ApplicationError,
    NotFoundError,
    RateLimitError,
    ValidationError,
    database_unavailable,
    internal_error_body,
)
from flywheel.jsonin import parse_json
from flywheel.models import ApiKey, Tenant
from routing import conversation, llm
from routing.breaker import breaker_apply_later, breaker_note, trial_claim
from routing.classify import IntentResult, Turn
from routing.errors import AllBackendsFailedError, BackendUnavailableError, NoMatchingFlowError
from routing.execution import Attempt, HistoryFor, StreamProgress, run_chain, stream_chain
from routing.models import ANSWERED_OUTCOMES, Outcome
from routing.planning import (
    FlowNotRoutable,
    Plan,
    classify_intent,
    classify_type,
    plan,
    plan_flow,
)
from routing.querytype import QueryTypeDecision
from routing.recording import (
    CachedAnswer,
    DecisionData,
    answer_recall,
    record_later,
    session_settled,
)
from routing.requests import QueryRequest, query_request
from routing.scoring import Candidate, Trial
from routing.sessions import (
    PastTurn,
    session_cached,
    session_history,
    session_key,
    session_new,
    session_recent,
    session_remember,
)
from routing.state import RoutingState, current_state, now
from routing.state import forget as forget_state

logger = logging.getLogger(__name__)

# Tasks that must finish even if the client that started them goes away.
_background: set[asyncio.Task[Any]] = set()


def trace_path(request_id: uuid.UUID | str) -> str:
    return f"/decisions/{request_id}"


@dataclass
class _Query:
    """One query on its way through routing."""

    request: QueryRequest
    tenant: Tenant
    request_id: uuid.UUID = field(default_factory=ids.uuid4)
    started: float = field(default_factory=time.perf_counter)
    session_id: uuid.UUID | None = None
    history: list[PastTurn] = field(default_factory=list)
    intent: IntentResult | None = None
    query_type: QueryTypeDecision | None = None
    plan: Plan | None = None
    backend_question: str = ""
    local_answer: str | None = None
    cached_from: dict[str, str] | None = None  # the answer came from the cache: whose it was
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

    def mark(self, name: str) -> None:
        elapsed = (time.perf_counter() - self.started) * 1000
        self.timings[name] = round(elapsed - sum(self.timings.values()), 3)

    def evidence(self) -> dict[str, Any]:
        """Why the intent and query type are what they are, for the decision's record."""
        found: dict[str, Any] = {}
        if self.intent is not None:
            found["intent"] = list(self.intent.evidence)
        if self.query_type is not None:
            qt = self.query_type.as_dict()
            found["query_type"] = {
                k: qt[k]
                for k in ("reasoning", "global_weight", "local_weight", "method", "evidence")
            }
        if self.cached_from is not None:
            found["cached_from"] = self.cached_from
        if self.plan is not None and self.plan.explored:
            found["explored"] = self.plan.candidates[0].backend.name
        return found

    def decision(self, outcome: str, **fields: Any) -> DecisionData:
        """The decision to record. An answer ready after its caller had gone is
        ``abandoned``: what the client got, not what routing achieved (the evidence
        keeps that, as ``answered_as``)."""
        evidence = self.evidence()
        if self.client_gone and outcome in ANSWERED_OUTCOMES:
            evidence["answered_as"] = outcome
            outcome = Outcome.ABANDONED
        intent = self.intent
        qt = self.query_type
        self.timings.setdefault("total_ms", round((time.perf_counter() - self.started) * 1000, 3))
        # A session opened for this query whose id the caller never got (no answer) is
        # not kept: it would be a conversation nobody can continue or look up.
        opened_here = self.request.session_id is None and fields.get("answer") is None
        return DecisionData(
            request_id=self.request_id,
            tenant_id=self.tenant.pk,
            question=self.request.question,
            outcome=outcome,
            session_id=None if opened_here else self.session_id,
            intent=intent.intent if intent else "",
            intent_confidence=intent.confidence if intent else None,
            intent_method=intent.method if intent else "",
            query_type=qt.query_type if qt else "",
            query_type_confidence=qt.confidence if qt else None,
            evidence=evidence,
            routing_method=self.plan.routing_method if self.plan else _method(self.request),
            candidates=[c.as_dict() for c in self.plan.candidates] if self.plan else [],
            timings=dict(self.timings),
            **fields,
        )


def _method(request: QueryRequest) -> str:
    return "auto" if request.backend.lower() == "auto" and request.flow is None else "explicit"


def _turns(history: Sequence[PastTurn]) -> list[Turn]:
    return [Turn(t.question, t.intent, t.answer) for t in history]


async def _record(
    query: _Query, data: DecisionData, state: RoutingState, answer: CachedAnswer | None = None
) -> None:
    """Write the rows (and cache the answer) behind the answer; remember the turn for
    the conversation before the answer goes out."""
    record_later(data, performance_window=state.policy.performance_window, answer=answer)
    query.recorded = True
    if data.answer is not None and query.session_id is not None:
        await session_remember(
            tenant_id=query.tenant.pk,
            session_id=query.session_id,
            recent=query.history,
            turn=PastTurn(data.question, data.answer, data.intent, data.backend_id, data.flow_id),
            alone=len(_background) <= 1,  # this query is the only one in flight
        )


async def _open_session(query: _Query) -> None:
    if query.request.session_id is None:
        query.session_id = session_new(tenant_id=query.tenant.pk)
        return
    key = session_key(query.request.session_id)
    recent = session_cached(tenant_id=query.tenant.pk, session_id=key)
    if recent is None:  # not in the cache: read the database once this process's writes land
        await session_settled(key)
        key, recent = await db(session_recent)(tenant_id=query.tenant.pk, session_id=key)
    query.session_id, query.history = key, recent


async def _full_history(query: _Query) -> list[PastTurn]:
    """Every turn of the session: the stored ones, plus recent ones still being written."""
    if query.session_id is None:
        return []
    await session_settled(query.session_id)
    stored = await db(session_history)(tenant_id=query.tenant.pk, session_id=query.session_id)
    tail = stored[-len(query.history) :] if query.history else []
    return stored + [t for t in query.history if t not in tail]


@asynccontextmanager
async def _recorded(query: _Query, state: RoutingState) -> AsyncIterator[None]:
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
            await _record(
                query,
                query.decision("rejected", error_type=err.type, error_message=err.message),
                state,
            )
        raise
    except DATABASE_UNAVAILABLE as err:  # an outage, not a bug: 503, and retry
        logger.warning("Query %s: the database fails (%s)", query.request_id, err)
        unavailable = database_unavailable()
        if not query.recorded:
            await _record(
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
            await _record(
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


async def _prepare(query: _Query, state: RoutingState) -> None:
    """Session, classification and the plan (run inside _recorded: a refusal is recorded)."""
    request = query.request
    await _open_session(query)
    query.intent = await classify_intent(
        state, request.question, _turns(query.history), request.intent
    )
    query.query_type = await classify_type(state, request.question)
    query.mark("classify_ms")
    query.backend_question = request.question
    if query.intent.intent == "conversation-query":
        full = await _full_history(query)
        config = llm.llm_config() if state.policy.llm_classification_enabled else None
        query.local_answer = await conversation.answer_about_conversation(
            request.question, full, config
        )
        query.mark("route_ms")
        return
    if query.intent.intent == "summarize":
        answers = [t.answer for t in query.history if t.answer][-conversation.SUMMARIZE_LAST :]
        if not answers:
            raise ValidationError(
                "There is nothing to summarize yet: this conversation has no answers.",
                details={"session_id": str(query.session_id)},
            )
        query.backend_question = conversation.summarize_question(answers, request.question)
    query.plan = await _plan(
        state, request, query.tenant, query.intent.intent, query.query_type, trial=trial_claim
    )
    query.mark("route_ms")


async def _plan(
    state: RoutingState,
    request: QueryRequest,
    tenant: Tenant | None,
    intent: str,
    query_type: QueryTypeDecision | None,
    *,
    trial: Trial | None = None,
) -> Plan:
    """The candidates for a query: its given flow (and, with fallback, the others), or
    the best for its intent on the backend asked for or on any. ``trial``: see plan()."""
    qt = query_type.query_type if query_type else None
    tenant_id = tenant.pk if tenant else None
    if request.flow is None:
        return plan(
            state,
            tenant_id=tenant_id,
            intent=intent,
            query_type=qt,
            preference=request.backend,
            now=now(),
            trial=trial,
        )
    flow = request.flow

    def planned(current: RoutingState) -> Plan:
        return plan_flow(
            current,
            tenant_id=tenant_id,
            intent=intent,
            query_type=qt,
            flow=flow,
            preference=request.backend,
            fallback=request.fallback,
            now=now(),
            trial=trial,
        )

    try:
        return planned(state)
    except FlowNotRoutable:
        refused = await db(_why_not_routable)(tenant, flow, request.backend)
        if refused is not None:
            raise refused from None
    # The database has it runnable: a flow created or deployed within the last second,
    # newer than this process's memo of the routing state. Read the state again, once.
    forget_state()
    try:
        return planned(await current_state())
    except FlowNotRoutable:
        raise BackendUnavailableError(
            f"Flow {flow!r} cannot run yet; try again in a second.", details={"flow": flow}
        ) from None


def _why_not_routable(tenant: Tenant | None, flow: str, backend: str) -> ApplicationError | None:
    """Why a named flow cannot run, read from the database on this error path only;
    None when the database has it runnable (the routing state is behind)."""
    named = None if backend.lower() in {"auto", *kinds()} else backend
    try:
        target = resolve_flow(tenant=tenant, flow_id=flow, backend=named)
    except ApplicationError as err:
        return err
    row = target.flow
    if row is None:
        return NotFoundError(
            f"No flow {flow!r} on backend {target.backend.name!r}.",
            details={"flow": flow, "backend": target.backend.name},
        )
    if not row.deployed:
        return ValidationError(
            f"Chatflow {row.name!r} is not deployed: deploy it before running it.",
            details={"field": "chatflow_id", "value": row.external_id, "constraint": "deployed"},
        )
    if not row.backend.enabled:
        return BackendUnavailableError(
            f"Backend {row.backend.name!r} of flow {row.name!r} is disabled.",
            details={"backend": row.backend.name, "flow": flow},
        )
    return None


def _history_for(query: _Query) -> HistoryFor:
    """Earlier exchanges to send along when the conversation moves to another backend,
    or to another flow of the same one (a backend keeps a session's memory per flow)."""
    last = next(
        ((t.backend_id, t.flow_id) for t in reversed(query.history) if t.backend_id is not None),
        None,
    )
    exchanges = [Exchange(t.question, t.answer) for t in query.history if t.answer]

    def history_for(candidate: Candidate) -> Sequence[Exchange]:
        if last is None or last == (candidate.backend.id, candidate.flow.id):
            return ()
        if last[1] is None and last[0] == candidate.backend.id:
            return ()  # a turn cached before flows were kept: same backend is enough
        return exchanges

    return history_for


def _routing_block(
    query: _Query,
    *,
    winner: Candidate | None,
    attempts: Sequence[Attempt],
    cached: bool = False,
) -> dict[str, Any]:
    intent = query.classified
    return {
        "intent": intent.intent,
        "intent_confidence": intent.confidence,
        "method": intent.method,
        "evidence": list(intent.evidence),
        "query_type": query.query_type.as_dict() if query.query_type else None,
        "routing_method": query.plan.routing_method if query.plan else "local",
        "backend": winner.backend.name if winner else None,
        "flow": winner.flow.name if winner else None,
        "score": winner.score if winner else None,
        "candidates": [c.as_dict() for c in query.plan.candidates] if query.plan else [],
        "fallback_used": len(attempts) > 1 or cached,
        "fallback_chain": [a.as_dict() for a in attempts],
        "cached": cached,
        "timings": dict(query.timings),
    }


def _response(query: _Query, answer: str, routing: dict[str, Any]) -> dict[str, Any]:
    body: dict[str, Any] = {
        "answer": answer,
        "session_id": str(query.session_id),
        "request_id": str(query.request_id),
    }
    if query.request.include_routing_metadata:
        body["routing"] = routing
    body["trace_url"] = trace_path(query.request_id)
    return body


def _why_no_answer(*, attempts: bool, spent: bool, budget: float) -> str:
    """The end of the message of a query nothing answered."""
    if spent:
        return f" within the query's time budget of {budget:g} s."
    return "." if attempts else ": every backend with a matching flow is down."


def _log_failed_attempts(query: _Query, attempts: Sequence[Attempt]) -> None:
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


async def _conclude(
    query: _Query,
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
    breaker_apply_later(breaker_note(attempts, state.health, now()))
    if result is not None and winner is not None:
        outcome = "success" if len(attempts) == 1 else "fallback"
        await _record(
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
            CachedAnswer(
                tenant_id=query.tenant.pk,
                intent=intent,
                question=query.backend_question,
                value={
                    "answer": result.text,
                    "backend": winner.backend.name,
                    "flow": winner.flow.name,
                },
                ttl=state.policy.answer_cache_ttl_seconds,
            ),
        )
        return _response(
            query, result.text, _routing_block(query, winner=winner, attempts=attempts)
        )
    cached = (
        answer_recall(query.tenant.pk, intent, query.backend_question) if may_use_cache else None
    )
    if cached is not None:
        query.cached_from = {"backend": cached["backend"], "flow": cached["flow"]}
        await _record(
            query,
            query.decision("cached", attempts=tuple(attempts), answer=cached["answer"]),
            state,
        )
        routing = _routing_block(query, winner=None, attempts=attempts, cached=True)
        routing["cached_from"] = query.cached_from
        return _response(query, cached["answer"], routing)
    budget = state.policy.query_budget_seconds
    spent = time.perf_counter() - query.started >= budget
    last_error = attempts[-1].error_type if attempts else "AllBackendsDown"
    if spent and not attempts:
        last_error = "BudgetExceeded"
    failure = AllBackendsFailedError(
        f"No backend could answer the {intent!r} question"
        + _why_no_answer(attempts=bool(attempts), spent=spent, budget=budget),
        details={
            "request_id": str(query.request_id),
            "intent": intent,
            "fallback_chain": [a.as_dict() for a in attempts],
        },
    )
    await _record(
        query,
        query.decision(
            "failed",
            attempts=tuple(attempts),
            error_type=last_error,
            error_message=failure.message,
        ),
        state,
    )
    raise failure


async def _answered_locally(query: _Query, state: RoutingState, answer: str) -> dict[str, Any]:
    """Record and build an answer Flywheel gave itself (from the conversation)."""
    query.timings["total_ms"] = round((time.perf_counter() - query.started) * 1000, 3)
    await _record(query, query.decision("success", answer=answer), state)
    return _response(query, answer, _routing_block(query, winner=None, attempts=()))


async def _answer(query: _Query) -> dict[str, Any]:
    request = query.request
    state = await current_state()
    async with _recorded(query, state):
        await _prepare(query, state)
        if query.local_answer is not None:
            return await _answered_locally(query, state, query.local_answer)
        chain = await run_chain(
            query.planned.candidates,
            query.backend_question,
            session_id=str(query.session_id),
            parameters=_backend_parameters(request),
            history_for=_history_for(query),
            deadline=query.started + state.policy.query_budget_seconds,
        )
        query.timings["execute_ms"] = chain.execute_ms
        return await _conclude(
            query, state, result=chain.result, winner=chain.winner, attempts=chain.attempts
        )


def _backend_parameters(request: QueryRequest) -> dict[str, Any]:
    return {k: v for k, v in request.parameters.items() if k != "stream"}


async def answers_finish(timeout: float = 30.0) -> None:
    """Wait (up to ``timeout``) for the answers this loop is still producing, their
    clients gone or not, so that a shutdown records them instead of cutting them off."""
    loop = asyncio.get_running_loop()
    pending = [task for task in _background if task.get_loop() is loop]
    if pending:
        await asyncio.wait(pending, timeout=timeout)


async def answer_question(request: QueryRequest, *, tenant: Tenant) -> dict[str, Any]:
    """Answer a question: classify, route, run with fallback, record. Returns the response body.

    Raises ApplicationError subclasses (ValidationError, NotFoundError,
    NoMatchingFlowError, BackendUnavailableError, AllBackendsFailedError),
    each after its decision has been recorded. The work is shielded: a
    client that goes away mid-answer does not stop it being recorded.
    """
    query = _Query(request, tenant)
    logs.request_id.set(str(query.request_id))  # every line logged answering it names it
    task = asyncio.ensure_future(_answer(query))
    _background.add(task)
    task.add_done_callback(_background.discard)
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:  # the client went away; the answer goes on, unseen
        query.client_gone = True
        raise


# Refusals past the limit recorded as decisions, per key and window: enough to see a
# key hitting its limit, without letting a flood over it write a row per request.
RECORDED_REFUSALS = 10


def query_refused(request: HttpRequest, api_key: ApiKey, err: RateLimitError) -> None:
    """Record a query refused at the door, before routing (over its key's rate limit):
    one "rejected" decision, holding the question if the body is a valid query.

    Only the first RECORDED_REFUSALS refusals of a key in a window are recorded.
    Adds the decision's ``request_id`` to the error's details, as a refusal
    inside routing does. The row is written behind the answer (record_later).
    """
    if err.excess > RECORDED_REFUSALS:
        return
    try:
        refused = query_request(parse_json(request.body or b"null"))
        question, method = refused.question, _method(refused)
    except (ApplicationError, SuspiciousOperation):  # not a valid query, or a body too big
        question, method = "", "auto"
    data = DecisionData(
        request_id=ids.uuid4(),
        tenant_id=api_key.tenant_id,
        question=question,
        outcome="rejected",
        error_type=err.type,
        routing_method=method,
    )
    err.details.setdefault("request_id", str(data.request_id))
    record_later(data, performance_window=1)  # no attempts: no aggregate to refresh


async def _stream_producer(query: _Query, queue: asyncio.Queue[dict[str, Any] | None]) -> None:
    try:
        state = await current_state()
        async with _recorded(query, state):
            await _stream(query, state, queue)
    except ApplicationError as err:
        await queue.put({"event": "error", **err.as_dict()})
    except Exception:  # recorded and logged by _recorded; the client hears the usual shape
        await queue.put(
            {"event": "error", **internal_error_body({"request_id": str(query.request_id)})}
        )
    finally:
        await queue.put(None)


async def _stream(
    query: _Query, state: RoutingState, queue: asyncio.Queue[dict[str, Any] | None]
) -> None:
    await _prepare(query, state)
    if query.local_answer is not None:
        await queue.put({"event": "chunk", "text": query.local_answer})
        await queue.put(
            {"event": "end", **await _answered_locally(query, state, query.local_answer)}
        )
        return
    progress = StreamProgress(attempts=[])
    sent = False
    try:
        async for text in stream_chain(
            query.planned.candidates,
            query.backend_question,
            session_id=str(query.session_id),
            parameters=_backend_parameters(query.request),
            history_for=_history_for(query),
            progress=progress,
            deadline=query.started + state.policy.query_budget_seconds,
        ):
            sent = True
            await queue.put({"event": "chunk", "text": text})
    except ApplicationError:
        pass  # a failure after the first chunk: recorded below as a failed query
    query.timings["execute_ms"] = progress.execute_ms
    body = await _conclude(
        query,
        state,
        result=progress.result,
        winner=progress.winner,
        attempts=progress.attempts,
        may_use_cache=not sent,  # never another answer after part of one
    )
    if progress.result is None:  # answered from the cache
        await queue.put({"event": "chunk", "text": body["answer"]})
    await queue.put({"event": "end", **body})


async def stream_answer(
    request: QueryRequest, *, tenant: Tenant
) -> AsyncGenerator[dict[str, Any], None]:
    """Answer as a stream of events: ``chunk`` (text) ..., then ``end`` (the full
    response body, routing included) or ``error`` (the error shape).

    The work runs in its own task: if the consumer stops listening, the
    answer is still completed and recorded.
    """
    queue: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue()
    query = _Query(request, tenant)
    logs.request_id.set(str(query.request_id))
    task = asyncio.ensure_future(_stream_producer(query, queue))
    _background.add(task)
    task.add_done_callback(_background.discard)
    finished = False
    try:
        while (event := await queue.get()) is not None:
            yield event
        finished = True
    finally:
        # Closed early (the client went away): the answer goes on, and is recorded as
        # abandoned unless it was already recorded (the client saw the end of it).
        query.client_gone = not finished


async def route_question(request: QueryRequest, *, tenant: Tenant | None) -> dict[str, Any]:
    """Dry run: classify and score without running anything or writing anything.

    What a real query would be refused for as bad input (an unknown backend or
    intent, a bad session) is raised; why nothing could be selected (no flow,
    an unavailable backend) is part of the plan, under ``error``.
    """
    state = await current_state()
    history: list[PastTurn] = []
    if request.session_id is not None and tenant is not None:
        _, history = await db(session_recent)(tenant_id=tenant.pk, session_id=request.session_id)
    intent = await classify_intent(state, request.question, _turns(history[-5:]), request.intent)
    query_type = await classify_type(state, request.question)
    candidates: tuple[Candidate, ...] = ()
    error: dict[str, Any] | None = None
    if intent.intent != "conversation-query":
        try:
            candidates = (await _plan(state, request, tenant, intent.intent, query_type)).candidates
        except (NoMatchingFlowError, BackendUnavailableError, NotFoundError) as err:
            error = err.as_dict()["error"]
    return {
        "question": request.question,
        "intent": intent.intent,
        "confidence": intent.confidence,
        "method": intent.method,
        "evidence": list(intent.evidence),
        "query_type": query_type.query_type if query_type else None,
        "query_type_confidence": query_type.confidence if query_type else None,
        "candidates": [c.as_dict() for c in candidates],
        "selected": candidates[0].as_dict() if candidates else None,
        "error": error,
    }


async def run_flow(
    *,
    tenant: Tenant,
    chatflow_id: Any,
    question: Any,
    backend: Any = None,
    session_id: Any = None,
    fallback: Any = False,
    include_routing_metadata: Any = True,
) -> dict[str, Any]:
    """Run one given flow (seed 003's run_prediction, REST predict): a query with its flow
    named, so it is validated, recorded and measured like any other. Returns the answer
    body of :func:`answer_question`."""
    data: dict[str, Any] = {
        "question": question,
        "flow": chatflow_id,
        "fallback": fallback,
        "include_routing_metadata": include_routing_metadata,
    }
    if backend is not None:
        data["backend"] = backend
    if session_id is not None:
        data["session_id"] = session_id
    return await answer_question(query_request(data), tenant=tenant)

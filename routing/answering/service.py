"""The universal query: the one code path that answers a question.

Every door (REST and the CLI; the MCP server and web pages are built on the
same calls) uses :func:`answer_question` (or :func:`stream_answer`, or the dry
run :func:`route_question`). A query goes through three steps, each a module:
preparation (session, classification, plan), execution (the fallback chain)
and outcome (exactly one decision recorded, and the answer built).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator
from typing import Any

from django.core.exceptions import SuspiciousOperation
from django.http import HttpRequest

from backends.adapters import close_adapters
from backends.http.openai import close_endpoints
from flywheel import ids, logs
from flywheel.asyncdb import db
from flywheel.errors import (
    ApplicationError,
    NotFoundError,
    RateLimitError,
    internal_error_body,
)
from flywheel.jsonin import parse_json
from flywheel.models import ApiKey, Tenant
from routing.answering.classify import classify_intent, classify_type
from routing.answering.execution import StreamProgress, run_chain, stream_chain
from routing.answering.outcome import answered_locally, conclude, recorded
from routing.answering.preparation import given_history, history_for_query, plan_query, prepare
from routing.answering.query import Query, as_turns, in_flight, requested_method
from routing.answering.query_input import QueryRequest, query_request
from routing.answering.sessions import (
    session_recent,
)
from routing.errors import BackendUnavailableError, NoMatchingFlowError
from routing.recording.decision import DecisionData
from routing.recording.writer import record_later, writer_stop
from routing.selection.scoring import Candidate
from routing.selection.state import RoutingState, current_state
from routing.selection.words import why


async def _answer(query: Query) -> dict[str, Any]:
    request = query.request
    state = await current_state()
    async with recorded(query, state):
        await prepare(query, state)
        if query.local_answer is not None:
            return await answered_locally(query, state, query.local_answer)
        chain = await run_chain(
            query.planned.candidates,
            query.backend_question,
            intent=query.classified.intent,
            policy=state.policy,
            session_id=str(query.session_id),
            parameters=_backend_parameters(request),
            history_for=history_for_query(query),
            deadline=query.started + state.policy.query_budget_seconds,
        )
        query.timings["execute_ms"] = chain.execute_ms
        return await conclude(
            query, state, result=chain.result, winner=chain.winner, attempts=chain.attempts
        )


def _backend_parameters(request: QueryRequest) -> dict[str, Any]:
    return {k: v for k, v in request.parameters.items() if k != "stream"}


async def answers_finish(timeout: float = 30.0) -> None:
    """Wait (up to ``timeout``) for the answers this loop is still producing, their
    clients gone or not, so that a shutdown records them instead of cutting them off."""
    loop = asyncio.get_running_loop()
    pending = [task for task in in_flight if task.get_loop() is loop]
    if pending:
        await asyncio.wait(pending, timeout=timeout)


async def serving_stop() -> None:
    """A server's clean stop, whichever door it serves: let the answers still being
    produced finish, close the backend and LLM clients, and let the decisions still
    being written land, deleting the spool's committed segments, so nothing is cut off
    and the next start has nothing to replay. (The server re-raises its signal after
    this, so the exit hook never runs.)"""
    await answers_finish()
    await close_adapters()
    await close_endpoints()
    await asyncio.to_thread(writer_stop)


async def answer_question(request: QueryRequest, *, tenant: Tenant) -> dict[str, Any]:
    """Answer a question: classify, route, run with fallback, record. Returns the response body.

    Raises ApplicationError subclasses (ValidationError, NotFoundError,
    NoMatchingFlowError, BackendUnavailableError, AllBackendsFailedError),
    each after its decision has been recorded. The work is shielded: a
    client that goes away mid-answer does not stop it being recorded.
    """
    query = Query(request, tenant)
    logs.request_id.set(str(query.request_id))  # every line logged answering it names it
    task = asyncio.ensure_future(_answer(query))
    in_flight.add(task)
    task.add_done_callback(in_flight.discard)
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
        question, method = refused.question, requested_method(refused)
    except (ApplicationError, SuspiciousOperation):  # not a valid query, or a body too big
        question, method = "", "auto"
    data = DecisionData(
        request_id=ids.uuid7(),
        tenant_id=api_key.tenant_id,
        question=question,
        outcome="rejected",
        error_type=err.type,
        routing_method=method,
    )
    err.details.setdefault("request_id", str(data.request_id))
    record_later(data, performance_window=1)  # no attempts: no aggregate to refresh


async def _stream_producer(query: Query, queue: asyncio.Queue[dict[str, Any] | None]) -> None:
    try:
        state = await current_state()
        async with recorded(query, state):
            await _stream(query, state, queue)
    except ApplicationError as err:
        await queue.put({"event": "error", **err.as_dict()})
    except Exception:  # recorded and logged by recorded; the client hears the usual shape
        await queue.put(
            {"event": "error", **internal_error_body({"request_id": str(query.request_id)})}
        )
    finally:
        await queue.put(None)


async def _stream(
    query: Query, state: RoutingState, queue: asyncio.Queue[dict[str, Any] | None]
) -> None:
    await prepare(query, state)
    if query.local_answer is not None:
        await queue.put({"event": "chunk", "text": query.local_answer})
        await queue.put(
            {"event": "end", **await answered_locally(query, state, query.local_answer)}
        )
        return
    progress = StreamProgress(attempts=[])
    sent = False
    try:
        async for text in stream_chain(
            query.planned.candidates,
            query.backend_question,
            intent=query.classified.intent,
            policy=state.policy,
            session_id=str(query.session_id),
            parameters=_backend_parameters(query.request),
            history_for=history_for_query(query),
            progress=progress,
            deadline=query.started + state.policy.query_budget_seconds,
        ):
            sent = True
            await queue.put({"event": "chunk", "text": text})
    except ApplicationError:
        pass  # a failure after the first chunk: recorded below as a failed query
    query.timings["execute_ms"] = progress.execute_ms
    body = await conclude(
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
    request: QueryRequest, *, tenant: Tenant, keep_session: bool = False
) -> AsyncGenerator[dict[str, Any], None]:
    """Answer as a stream of events: ``chunk`` (text) ..., then ``end`` (the full
    response body, routing included) or ``error`` (the error shape). ``keep_session``:
    a question without a session id starts one (the chat page's conversations), rather
    than being one-shot (Query.keep_session).

    The work runs in its own task: if the consumer stops listening, the
    answer is still completed and recorded.
    """
    queue: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue()
    query = Query(request, tenant, keep_session=keep_session)
    logs.request_id.set(str(query.request_id))
    task = asyncio.ensure_future(_stream_producer(query, queue))
    in_flight.add(task)
    task.add_done_callback(in_flight.discard)
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
    history = await given_history(state, request)
    if request.session_id is not None and tenant is not None:
        found = await db(session_recent)(tenant_id=tenant.pk, session_id=request.session_id)
        history = found.turns
    intent = await classify_intent(state, request.question, as_turns(history[-5:]), request.intent)
    query_type = await classify_type(state, request.question)
    candidates: tuple[Candidate, ...] = ()
    error: dict[str, Any] | None = None
    if intent.intent != "conversation-query":
        try:
            candidates = (
                await plan_query(state, request, tenant, intent.intent, query_type)
            ).candidates
        except (NoMatchingFlowError, BackendUnavailableError, NotFoundError) as err:
            error = err.as_dict()["error"]
    return {
        "question": request.question,
        "intent": intent.intent,
        "confidence": intent.confidence,
        "method": intent.method,
        "evidence": intent.evidence_shown(),
        "query_type": query_type.query_type if query_type else None,
        "query_type_confidence": query_type.confidence if query_type else None,
        "candidates": [c.as_dict() for c in candidates],
        "selected": candidates[0].as_dict() if candidates else None,
        "why": why([c.as_dict() for c in candidates], intent=intent.intent) if candidates else None,
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

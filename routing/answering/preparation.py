"""Before a query runs: its session, its classification and its plan of candidates.

Run inside outcome.recorded: a refusal on the way (a bad session, an unknown intent or
backend, no flow) is recorded as the query's decision.
"""

from __future__ import annotations

import asyncio
import dataclasses
import uuid
from collections.abc import Sequence

from django.conf import settings
from django.utils import timezone

from backends.adapters import kinds
from backends.adapters.base import Exchange
from chatflows.lifecycle import resolve_flow
from flywheel import ids
from flywheel.asyncdb import db
from flywheel.errors import (
    ApplicationError,
    NotFoundError,
    ValidationError,
)
from flywheel.models import Tenant
from routing.answering import conversation
from routing.answering.classify import classify_intent, classify_type
from routing.answering.execution import HistoryFor
from routing.answering.query import Query, as_turns
from routing.answering.query_input import QueryRequest
from routing.answering.sessions import (
    PastTurn,
    Recent,
    session_cached,
    session_history,
    session_key,
    session_new,
    session_recent,
)
from routing.classification import llm
from routing.classification.query_type import QueryTypeDecision
from routing.errors import BackendUnavailableError
from routing.recording.own_writes import session_settled
from routing.selection.breaker import trial_claim
from routing.selection.planning import FlowNotRoutable, Plan, plan, plan_flow
from routing.selection.scoring import Candidate, Trial
from routing.selection.state import RoutingState, current_state, now
from routing.selection.state import forget as forget_state

# Seconds within which another process has written a one-shot question's decision (its
# writer writes within milliseconds when it keeps up).
ONE_SHOT_WRITTEN_WITHIN = 2.0


async def _open_session(query: Query) -> None:
    if query.request.session_id is None:  # one-shot: its request id names it if continued
        query.session_id = session_new() if query.keep_session else query.request_id
        return
    key = session_key(query.request.session_id)
    recent = session_cached(tenant_id=query.tenant.pk, session_id=key)
    if recent is None:  # not in the cache: read the database once this process's writes land
        await session_settled(key)
        found = await _session_or_one_shot(query.tenant.pk, key)
        key, recent, query.opening = found.session_id, found.turns, found.opening
    query.session_id, query.history = key, recent


async def _session_or_one_shot(tenant_id: int, key: uuid.UUID) -> Recent:
    """The session, or the one-shot question, of that id. A one-shot question answered
    by another process a moment ago may not be written yet: for an id made in the
    last seconds (a version-7 request id says when), the database is asked again."""
    made = ids.uuid7_time(key)
    while True:
        try:
            return await db(session_recent)(tenant_id=tenant_id, session_id=key)
        except NotFoundError:
            if made is None or (timezone.now() - made).total_seconds() > ONE_SHOT_WRITTEN_WITHIN:
                raise
        await asyncio.sleep(0.1)


async def given_history(state: RoutingState, request: QueryRequest) -> list[PastTurn]:
    """The conversation a caller keeps itself (``history``), as turns no backend answered
    here (so it travels to whichever flow answers: history_for_query); the last one
    with its intent, which a follow-up keeps as a session's would."""
    turns = [PastTurn(e["question"], e["answer"], "", None) for e in request.history]
    if turns:
        said = await classify_intent(state, turns[-1].question, as_turns(turns[-6:-1]), None)
        turns[-1] = dataclasses.replace(turns[-1], intent=said.intent)
    return turns


async def _full_history(query: Query) -> list[PastTurn]:
    """Every turn of the session: the stored ones, plus recent ones still being written."""
    if query.session_id is None:
        return []
    await session_settled(query.session_id)
    stored = await db(session_history)(tenant_id=query.tenant.pk, session_id=query.session_id)
    tail = stored[-len(query.history) :] if query.history else []
    return stored + [t for t in query.history if t not in tail]


async def prepare(query: Query, state: RoutingState) -> None:
    """Session, classification and the plan (run inside recorded: a refusal is recorded)."""
    request = query.request
    await _open_session(query)
    if request.history:
        query.history = await given_history(state, request)
    query.intent = await classify_intent(
        state, request.question, as_turns(query.history), request.intent
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
    if query.intent.intent == "summarize":  # content the user gives goes to a flow as is
        answers = conversation.answers_within(
            [t.answer for t in query.history if t.answer][-conversation.SUMMARIZE_LAST :],
            settings.HISTORY_BUDGET_CHARS,
        )
        if conversation.summarizes_conversation(request.question, bool(answers)):
            if not answers:
                raise ValidationError(
                    "There is nothing to summarize yet: this conversation has no answers. "
                    "To summarize a text, include it in the question.",
                    details={"session_id": str(query.session_id)},
                )
            query.backend_question = conversation.summarize_question(answers, request.question)
    query.plan = await plan_query(
        state, request, query.tenant, query.intent.intent, query.query_type, trial=trial_claim
    )
    query.mark("route_ms")


async def plan_query(
    state: RoutingState,
    request: QueryRequest,
    tenant: Tenant | None,
    intent: str,
    query_type: QueryTypeDecision | None,
    *,
    trial: Trial | None = None,
) -> Plan:
    """The candidates for a query: its given flow, or the best for its intent on the
    backend asked for (each, with fallback, then the others), or on any. ``trial``: see
    plan()."""
    # What a flow's scope counts for (routing/selection/breadth.py); none without query routing.
    global_weight = query_type.global_weight if query_type else None
    tenant_id = tenant.pk if tenant else None
    if request.flow is None:
        return plan(
            state,
            tenant_id=tenant_id,
            intent=intent,
            global_weight=global_weight,
            preference=request.backend,
            fallback=request.falls_back,
            now=now(),
            trial=trial,
        )
    flow = request.flow

    def planned(current: RoutingState) -> Plan:
        return plan_flow(
            current,
            tenant_id=tenant_id,
            intent=intent,
            global_weight=global_weight,
            flow=flow,
            preference=request.backend,
            fallback=request.falls_back,
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


def _no_history(candidate: Candidate) -> Sequence[Exchange]:
    return ()


_NO_HISTORY: HistoryFor = _no_history


def history_for_query(query: Query) -> HistoryFor:
    """Earlier exchanges to send along when the conversation moves to another backend,
    or to another flow of the same one (a backend keeps a session's memory per flow)."""
    if not query.history:  # a new conversation: nothing travels
        return _NO_HISTORY
    last = next(
        ((t.backend_id, t.flow_id) for t in reversed(query.history) if t.backend_id is not None),
        None,
    )
    exchanges = conversation.exchanges_within(
        [Exchange(t.question, t.answer) for t in query.history if t.answer],
        settings.HISTORY_BUDGET_CHARS,
    )
    if query.request.history:  # the caller's own: no backend holds any of it
        return lambda candidate: exchanges

    def history_for(candidate: Candidate) -> Sequence[Exchange]:
        if last is None or last == (candidate.backend.id, candidate.flow.id):
            return ()
        if last[1] is None and last[0] == candidate.backend.id:
            return ()  # a turn cached before flows were kept: same backend is enough
        return exchanges

    return history_for

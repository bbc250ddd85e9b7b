"""Sessions: the conversation Flywheel keeps, whichever backend answers.

The database holds every turn. A question asked without a session id is one-shot:
no session is kept for it, and its caller gets its request id as its session id.
Continued under that id, the session starts then, its first turn that question
(one_shot_opening). The last few turns of each session are also
kept in the shared cache, updated as each answer goes out, so that the next
question of the conversation finds them at once, in whichever process it
lands, even while the turn's row is still being written behind the response.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Annotated, Any

from django.conf import settings
from django.db.models import Count, OuterRef, QuerySet, Subquery
from django.db.models.functions import Left
from pydantic import Field

from flywheel import ids
from flywheel.asyncdb import db
from flywheel.cache import shared_cache, shared_cache_set
from flywheel.contract import FROM_DIGITS, Contract, Says, validated
from flywheel.errors import NotFoundError, ValidationError
from routing.answering.query_input import SESSION_ID_RULE
from routing.models import ANSWERED_OUTCOMES, RoutingDecision, Session, Turn, with_request_id
from routing.recording.answers import answer_recall
from routing.recording.decision import clipped
from routing.recording.own_writes import reads_own_writes, session_settled

RECENT_TURNS = 5
MAX_SESSIONS_LISTED = 500
SESSIONS_LISTED = 50  # unless the caller asks for another number
PREVIEW_CHARS = 140  # of a conversation's last answer, in lists of conversations
SESSION_KEY = "flywheel:session:{id}"
SESSION_CACHE_SECONDS = 24 * 3600


class SessionList(Contract):
    """How many of the caller's conversations a list shows (GET /api/v1/sessions and the
    list_sessions tool: the REST door's parameter and the tool's argument are drawn
    from it, and :func:`sessions_list` validates with it)."""

    refused_message = "The parameters are not valid."
    one_refused = "The {field} parameter is not valid."

    limit: Annotated[
        int,
        Field(ge=1, le=MAX_SESSIONS_LISTED, description="At most this many."),
        FROM_DIGITS,
        Says(f"Must be an integer from 1 to {MAX_SESSIONS_LISTED}."),
    ] = SESSIONS_LISTED


@dataclass(frozen=True)
class PastTurn:
    question: str
    answer: str
    intent: str
    backend_id: int | None
    flow_id: int | None = None  # absent from turns cached before it was kept


def _past(turn: Turn) -> PastTurn:
    return PastTurn(turn.question, turn.answer, turn.intent, turn.backend_id, turn.flow_id)


def session_key(session_id: str | uuid.UUID, *, field: str = "session_id") -> uuid.UUID:
    """The session id as a UUID.

    Raises ValidationError naming ``field`` (where the id came from) for
    anything else, in the words of the query's own check (routing/answering/query_input.py).
    """
    try:
        return uuid.UUID(str(session_id))
    except ValueError as err:
        raise ValidationError(
            f"{field} must be a UUID returned by an earlier answer.",
            details={"fields": {field: SESSION_ID_RULE}},
        ) from err


def _cached(key: uuid.UUID) -> dict[str, Any] | None:
    found = shared_cache().get(SESSION_KEY.format(id=key))
    return found if isinstance(found, dict) else None


def _entry(tenant_id: int, turns: list[PastTurn]) -> dict[str, Any]:
    # vars(), not asdict(): a turn holds only plain values, and asdict's deep copy of
    # each cost a question about 30 µs.
    return {"tenant": tenant_id, "turns": [dict(vars(t)) for t in turns[-RECENT_TURNS:]]}


def _cache(key: uuid.UUID, tenant_id: int, turns: list[PastTurn]) -> None:
    shared_cache().set(SESSION_KEY.format(id=key), _entry(tenant_id, turns), SESSION_CACHE_SECONDS)


def session_new() -> uuid.UUID:
    """A new session's id; its row is written with its first decision."""
    return ids.uuid4()


def session_cached(*, tenant_id: int, session_id: uuid.UUID) -> list[PastTurn] | None:
    """The session's last turns from the shared cache; None when it is not there.

    Raises NotFoundError for another tenant's session.
    """
    cached = _cached(session_id)
    if cached is None:
        return None
    if cached["tenant"] != tenant_id:
        raise NotFoundError(f"No session {session_id}.", details={"session_id": str(session_id)})
    return [PastTurn(**t) for t in cached["turns"]]


@dataclass(frozen=True)
class Recent:
    """A conversation as a query continues it: its id, its last turns (oldest first)
    and, when it continues a one-shot question, that question as its first turn's
    record (DecisionData.opening)."""

    session_id: uuid.UUID
    turns: list[PastTurn]
    opening: dict[str, Any] | None = None


def _one_shots(tenant_id: int) -> QuerySet[RoutingDecision]:
    """The tenant's answered questions that were asked without a session id."""
    return RoutingDecision.objects.filter(
        tenant_id=tenant_id, session__isnull=True, outcome__in=ANSWERED_OUTCOMES
    )


def one_shot_opening(*, tenant_id: int, request_id: uuid.UUID) -> dict[str, Any] | None:
    """The tenant's answered one-shot question with that request id, as the first turn
    of the session that continues it (DecisionData.opening); None if there is none.

    No turn holds a one-shot question's answer: it is read from the answer cache, which
    keeps it for the policy's cache TTL (an hour by default); after that the question
    is continued with its question alone."""
    found = (
        with_request_id(_one_shots(tenant_id), request_id)
        .values("id", "question", "intent", "backend_id", "flow_id", "created_at")
        .first()
    )
    if found is None:
        return None
    cached = answer_recall(tenant_id, found["intent"], found["question"]) or {}
    return {
        "question": found["question"],
        "answer": clipped(str(cached.get("answer") or ""), settings.MAX_STORED_ANSWER_CHARS),
        "intent": found["intent"],
        "backend_id": found["backend_id"],
        "flow_id": found["flow_id"],
        "decision_id": found["id"],
        "created_at": found["created_at"].timestamp(),
    }


def _opening_turn(opening: dict[str, Any]) -> PastTurn:
    return PastTurn(
        opening["question"],
        opening["answer"],
        opening["intent"],
        opening["backend_id"],
        opening["flow_id"],
    )


def session_recent(*, tenant_id: int, session_id: str | uuid.UUID) -> Recent:
    """The session's id and last turns (oldest first); for the id of a one-shot question
    the tenant asked (its request id), that question as the first turn.

    Raises ValidationError for an id that is not a UUID, NotFoundError for a
    session the tenant does not own (another tenant's looks like none at all).
    """
    key = session_key(session_id)
    cached = session_cached(tenant_id=tenant_id, session_id=key)
    if cached is not None:
        return Recent(key, cached)
    session = Session.objects.filter(pk=key, tenant_id=tenant_id).first()
    if session is None:
        opening = one_shot_opening(tenant_id=tenant_id, request_id=key)
        if opening is None:
            raise NotFoundError(f"No session {key}.", details={"session_id": str(key)})
        return Recent(key, [_opening_turn(opening)], opening)
    recent = list(session.turns.order_by("-created_at", "-id")[:RECENT_TURNS])
    turns = [_past(t) for t in reversed(recent)]
    _cache(key, tenant_id, turns)
    return Recent(key, turns)


async def session_remember(
    *,
    tenant_id: int,
    session_id: uuid.UUID,
    recent: list[PastTurn],
    turn: PastTurn,
    alone: bool = False,
) -> None:
    """Cache the session's recent turns (as read at the start of the query) plus this one.

    Returns once they are stored; concurrent queries share the round trip
    (``alone``: no other query is in flight, see shared_cache_set).
    """
    await shared_cache_set(
        SESSION_KEY.format(id=session_id),
        _entry(tenant_id, [*recent, turn]),
        SESSION_CACHE_SECONDS,
        alone=alone,
    )


def session_known(*, tenant_id: int, session_id: str) -> str | None:
    """``session_id`` in canonical form if the tenant has that session (in the cache or
    the database) or had that one-shot question answered, else None: a door whose clients
    choose their own conversation ids (Flowise's chatId) starts a new session for any
    other."""
    try:
        key = uuid.UUID(session_id)
    except ValueError:
        return None
    if session_cached(tenant_id=tenant_id, session_id=key) is not None:
        return str(key)
    if Session.objects.filter(pk=key, tenant_id=tenant_id).exists():
        return str(key)
    return str(key) if with_request_id(_one_shots(tenant_id), key).exists() else None


async def session_continued(*, tenant_id: int, session_id: str) -> str | None:
    """:func:`session_known`, once this process has written what it has of that
    conversation (a one-shot question answered a moment ago)."""
    try:
        key = uuid.UUID(session_id)
    except ValueError:
        return None
    await session_settled(key)
    return await db(session_known)(tenant_id=tenant_id, session_id=session_id)


@reads_own_writes
def session_get(*, tenant_id: int, session_id: str) -> Session:
    """The tenant's session row, once this process's pending writes have landed.

    Raises ValidationError / NotFoundError like session_recent.
    """
    key = session_key(session_id)
    session = Session.objects.filter(pk=key, tenant_id=tenant_id).first()
    if session is None:
        raise NotFoundError(f"No session {key}.", details={"session_id": str(key)})
    return session


def session_history(*, tenant_id: int, session_id: str | uuid.UUID) -> list[PastTurn]:
    """Every stored turn of the tenant's session, oldest first (empty for a new one)."""
    key = session_key(session_id)
    turns = Turn.objects.filter(session_id=key, session__tenant_id=tenant_id).order_by(
        "created_at", "id"
    )
    return [_past(t) for t in turns]


@reads_own_writes
def sessions_list(*, tenant_id: int, limit: int = SESSIONS_LISTED) -> list[dict[str, Any]]:
    """The tenant's conversations, most recently active first (at most ``limit``, 1-500),
    once this process's pending writes have landed: each with ``id``, ``created_at``,
    ``updated_at``, ``first_question``, ``preview`` (the start of its last answer) and
    ``turn_count``.

    Sessions without a turn are left out: a query that got no answer (refused, or every
    backend failed) still records its session, whose id its caller never received. One
    query. Raises ValidationError for a ``limit`` SessionList refuses.
    """
    limit = validated(SessionList, {"limit": limit}).limit
    first = Turn.objects.filter(session=OuterRef("pk")).order_by("created_at", "id")
    last = Turn.objects.filter(session=OuterRef("pk")).order_by("-created_at", "-id")
    rows = (
        Session.objects.filter(tenant_id=tenant_id)
        .annotate(
            turn_count=Count("turns"),
            first_question=Subquery(first.values("question")[:1]),
            preview=Subquery(last.annotate(head=Left("answer", PREVIEW_CHARS)).values("head")[:1]),
        )
        .filter(turn_count__gt=0)
        .order_by("-updated_at", "-id")
        .values("id", "created_at", "updated_at", "first_question", "preview", "turn_count")[:limit]
    )
    return list(rows)

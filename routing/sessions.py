"""Sessions: the conversation Flywheel keeps, whichever backend answers."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from flywheel.errors import NotFoundError, ValidationError
from flywheel.models import Tenant
from routing.models import Session, Turn

RECENT_TURNS = 5


@dataclass(frozen=True)
class PastTurn:
    question: str
    answer: str
    intent: str
    backend_id: int | None


def session_open(*, tenant: Tenant, session_id: str | None) -> tuple[Session, list[PastTurn]]:
    """The tenant's session (a new one when ``session_id`` is None) and its recent turns.

    Raises ValidationError for an id that is not a UUID, and NotFoundError for
    one the tenant does not own (another tenant's session looks the same as
    none at all).
    """
    if session_id is None:
        return Session.objects.create(tenant=tenant), []
    session = session_get(tenant=tenant, session_id=session_id)
    recent = list(session.turns.order_by("-created_at", "-id")[:RECENT_TURNS])
    return session, [
        PastTurn(t.question, t.answer, t.intent, t.backend_id) for t in reversed(recent)
    ]


def session_answers(*, session: Session, count: int) -> list[str]:
    """The session's last ``count`` non-empty answers, oldest first."""
    answers = Turn.objects.filter(session=session).exclude(answer="").order_by("-created_at", "-id")
    return [t.answer for t in reversed(list(answers[:count]))]


def _session_key(session_id: str) -> uuid.UUID:
    try:
        return uuid.UUID(str(session_id))
    except ValueError as err:
        raise ValidationError(
            "session_id must be a UUID returned by an earlier answer.",
            details={"session_id": str(session_id)[:100]},
        ) from err


def session_get(*, tenant: Tenant, session_id: str) -> Session:
    """The tenant's session. Raises ValidationError / NotFoundError like session_open."""
    key = _session_key(session_id)
    session = Session.objects.filter(pk=key, tenant=tenant).first()
    if session is None:
        raise NotFoundError(f"No session {key}.", details={"session_id": str(key)})
    return session


def session_history(*, tenant: Tenant, session_id: str) -> list[PastTurn]:
    """Every turn of the tenant's session, oldest first."""
    session = session_get(tenant=tenant, session_id=session_id)
    return [
        PastTurn(t.question, t.answer, t.intent, t.backend_id)
        for t in session.turns.order_by("created_at", "id")
    ]

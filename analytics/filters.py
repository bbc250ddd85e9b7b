"""What the decisions and analytics reads take from a query string, declared once.

:class:`DecisionFilters` (GET /api/v1/decisions, the decisions page) and
:class:`AnalyticsQuery` (the analytics endpoints, the analytics page) declare
each parameter: the REST doors' OpenAPI parameters are drawn from them
(flywheel.openapi.query_parameters), and the reads validate with them
(analytics.selectors.decisions_for, analytics.reads), whichever door the
values came through. An empty filter is no filter. A few values are checked
where they are read, in that reading's words: a session id
(routing.answering.sessions.session_key), a range's dates
(analytics.reads.window_of) and a tenant (analytics.access).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field

from backends.models import MAX_NAME
from chatflows.filters import INTENT_RULE, IntentSlug
from flywheel.contract import Contract, Says, pick, refuse
from flywheel.jsonin import string_problem
from routing.models import Outcome

BACKEND_RULE = f"Must be a backend's name (up to {MAX_NAME} characters)."
OUTCOME_RULE = f"Must be one of: {', '.join(Outcome.values)}."
FORMAT_RULE = "Must be json or csv."


def _text(value: str) -> str:
    # The database would fail on some values (a NUL character): no row could hold them.
    if string_problem(value):
        raise refuse(BACKEND_RULE)
    return value


def _outcome(value: str | None) -> str | None:
    if value is not None and value not in Outcome.values:
        raise refuse(OUTCOME_RULE)
    return value


Intent = Annotated[IntentSlug | None, Says(INTENT_RULE)]
BackendName = Annotated[
    Annotated[str, Field(max_length=MAX_NAME), AfterValidator(_text)] | None,
    Field(description="A backend's name."),
    Says(BACKEND_RULE),
]


class DecisionFilters(Contract):
    """Which decisions: of one intent, outcome, backend or session."""

    refused_message = "The filters are not valid."
    one_refused = "The {field} filter is not valid."

    intent: Intent = None
    outcome: Annotated[
        str | None,
        AfterValidator(_outcome),
        Field(json_schema_extra={"enum": list(Outcome.values)}),
        Says(OUTCOME_RULE),
    ] = None
    backend: BackendName = None
    # Read by session_key, which takes a UUID in any spelling uuid.UUID does.
    session: Annotated[str | None, Field(json_schema_extra={"format": "uuid"})] = None


def _dated(description: str) -> Any:
    return Field(json_schema_extra={"format": "date-time"}, description=description)


class AnalyticsQuery(Contract):
    """What an analytics read takes: a range, an intent, a backend, whose decisions, and
    the answer's format."""

    refused_message = "The parameters are not valid."
    one_refused = "The {field} parameter is not valid."

    since: Annotated[
        str | None,
        _dated(
            "ISO 8601 (UTC when no offset is given). Default: 24 hours before until; "
            "before until, and at most 90 days before it."
        ),
    ] = None
    until: Annotated[
        str | None, _dated("ISO 8601 (UTC when no offset is given). Default: now.")
    ] = None
    intent: Intent = None
    tenant: Annotated[
        str | None,
        Field(
            max_length=50,
            description="A tenant's slug. An API key reads its own tenant only (another is "
            "403); staff logged in with the permission to view routing decisions read "
            "every tenant, or the one named.",
        ),
    ] = None
    backend: BackendName = None
    format: Annotated[
        Literal["json", "csv"],
        Field(description="csv: text/csv, one row per line."),
        Says(FORMAT_RULE),
    ] = "json"


# What an analytics view reads before it answers: the format to answer in.
AnswerFormat = pick(AnalyticsQuery, "AnswerFormat", "format", doc="The answer's format.")

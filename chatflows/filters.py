"""Which flows a list shows: the filters of GET /api/v1/flows and the list_flows tool,
declared once.

The REST door's query parameters are drawn from :class:`FlowFilters`
(flywheel.openapi.query_parameters), the MCP tool publishes its fields as
declared (agents/tools.py), and chatflows.selectors.flows_visible_to
validates them with it, whichever door they came through. An empty filter is
no filter (flywheel.contract.validated_filters).

The intent slug is declared here, in the lowest layer that filters by one:
routing's query takes an intent of the same shape
(routing/answering/query_input.py), and so do analytics' filters.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, Field

from backends.models import MAX_NAME
from flywheel.contract import Contract, Says, refuse
from flywheel.jsonin import string_problem

INTENT = "^[-a-z0-9_]{1,50}$"
INTENT_RULE = "Must be an intent slug such as 'code-review'."
# An intent's slug: what rules, queries and filters name an intent by.
IntentSlug = Annotated[str, Field(min_length=1, max_length=50, pattern=INTENT)]
BACKEND_RULE = f"Must be a backend's id or name (up to {MAX_NAME} characters)."


def _text(value: str) -> str:
    # The database would fail on some values (a NUL character): no row could match them.
    if string_problem(value):
        raise refuse(BACKEND_RULE)
    return value


class FlowFilters(Contract):
    """Which flows: on one backend, serving one intent."""

    refused_message = "The filters are not valid."
    one_refused = "The {field} filter is not valid."

    backend: Annotated[
        Annotated[str, Field(max_length=MAX_NAME), AfterValidator(_text)] | None,
        Field(description="Backend id or name."),
        Says(BACKEND_RULE),
    ] = None
    intent: Annotated[
        IntentSlug | None,
        Field(description="Only flows that serve this intent (generic flows serve any)."),
        Says(INTENT_RULE),
    ] = None

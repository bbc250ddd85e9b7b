"""How routing uses a flow, as a tenant's key changes it, declared once: the body of
PATCH /api/v1/flows/{id} (chatflows/api.py) and the arguments of MCP's
``set_flow_routing`` (agents/tools.py) besides its ``flow_id``.

chatflows.services.flow_routing_change validates what either door was sent with
:class:`FlowRoutingChange`, so both refuse a bad value in the same words, and the
OpenAPI schema and the tool's input schema are drawn from it. A field left out (or
null) is left as it is; at least one must be given.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, Field

from flywheel.contract import Contract, Says, refuse
from flywheel.jsonin import string_problem

# chatflows.models.FlowScope's values (tests/chatflows/test_flow_api.py holds them equal).
ScopeName = Literal["global", "local", "any"]
SCOPE_RULE = "Must be one of global, local, any."
MAX_KEYWORD = 50  # as an intent slug (chatflows/filters.py)
MAX_KEYWORDS = 50
KEYWORDS_RULE = (
    f"Must be a list of at most {MAX_KEYWORDS} intents (strings of up to {MAX_KEYWORD} "
    "characters, such as 'code-review')."
)


def _text(value: str) -> str:
    # The database cannot store some text (a NUL character, a lone surrogate).
    if string_problem(value):
        raise refuse(KEYWORDS_RULE)
    return value


Keyword = Annotated[str, Field(max_length=MAX_KEYWORD), AfterValidator(_text)]


class FlowRoutingChange(Contract):
    """How routing uses one of the caller's own flows: only what it names changes. A
    scope or keywords set here are kept by later discoveries."""

    refused_message = "The flow's routing settings are not valid."

    scope: Annotated[
        ScopeName | None,
        Field(
            description="The query type the flow is made for: global (themes, overviews), "
            "local (specific facts) or any."
        ),
        Says(SCOPE_RULE),
    ] = None
    is_generic: Annotated[
        bool | None,
        Field(description="It serves any intent, at a reduced match score."),
        Says("Must be true or false."),
    ] = None
    intent_keywords: Annotated[
        list[Keyword] | None,
        Field(
            max_length=MAX_KEYWORDS,
            description="The intents it serves (replaces its keywords; stored trimmed, "
            "in lower case, without blanks or repeats).",
        ),
        Says(KEYWORDS_RULE),
    ] = None

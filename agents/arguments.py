"""The chatflow tools' argument types: their ``Field`` constraints are the published
inputSchema (the query tools' arguments are the query's contract:
routing/answering/query_input.py).

Seed 003's schemas, as far as the SDK expresses them. Not expressed:
update_chatflow's top-level ``anyOf`` (at least one of name, flow_data,
deployed): Claude's API refuses anyOf/oneOf/allOf at the top of a tool's
input schema, which would drop every tool; the service refuses an update
that changes nothing instead (a ValidationError with constraint "anyOf").
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from chatflows import lifecycle

ChatflowId = Annotated[
    str,
    Field(
        min_length=1,
        max_length=lifecycle.MAX_FLOW_ID,
        description="The flow's id on its backend (or Flywheel's flow_id).",
    ),
]
OnBackend = Annotated[
    str | None,
    Field(
        min_length=1,
        max_length=lifecycle.MAX_BACKEND,
        description="The backend (id or name); needed when the id is on several, or for a "
        "flow made on the backend a moment ago.",
    ),
]
Name = Annotated[
    str, Field(min_length=1, max_length=lifecycle.MAX_NAME, description="Chatflow name")
]
FlowData = Annotated[
    str,
    Field(
        min_length=1,
        description="JSON string containing workflow structure (nodes and edges), under 1 MB",
    ),
]
ChatflowType = Literal["CHATFLOW", "AGENTFLOW", "MULTIAGENT", "ASSISTANT"]

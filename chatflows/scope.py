"""A flow's scope (seed 004's query types), derived at discovery.

A GLOBAL question wants corpus-wide understanding (themes, summaries, trends), a
LOCAL one a specific fact. A flow says which it is made for in its name and
description ("Weekly digest", "Docs Q&A") and in its nodes: a retriever or a
vector store answers specific facts; a summarization or map-reduce chain gives
the overview. Each side counts its hits, words of the name and description twice
as much as node kinds; the side with more wins, a tie (none at all, most often)
leaves the flow for any question.

A scope set by hand (the admin, ``set_flow --scope``, PATCH /api/v1/flows/{id},
MCP ``set_flow_routing``) is kept by later discoveries (``Flow.scope_edited``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from chatflows.models import FlowScope

_WORDS = {
    FlowScope.GLOBAL: re.compile(
        r"\b(summar\w*|overviews?|themes?|trends?|digests?|reports?|insights?|briefings?"
        r"|map ?reduce|landscape|big picture)\b"
    ),
    FlowScope.LOCAL: re.compile(
        r"\b(retriev\w*|rag|q ?& ?a|qa|faqs?|look ?ups?|search\w*|facts?|details?"
        r"|entit(y|ies)|definitions?|define|docs|documentation|knowledge ?base)\b"
    ),
}
_NODES = {
    FlowScope.GLOBAL: ("summar", "mapreduce", "map_reduce", "refine"),
    FlowScope.LOCAL: (
        "retriev",
        "vectorstore",
        "vector store",
        "chroma",
        "pinecone",
        "qdrant",
        "faiss",
        "weaviate",
        "milvus",
        "pgvector",
        "astradb",
        "elasticsearch",
    ),
}


def flow_scope(*, name: str, description: str = "", node_kinds: Iterable[str] = ()) -> str:
    """The scope a flow so named, described and built is made for ("any" when unsaid)."""
    text = f"{name} {description}".lower().replace("-", " ").replace("_", " ")
    kinds = list(node_kinds)
    hits = {
        scope: 2 * len(pattern.findall(text))
        + sum(any(stem in kind for stem in _NODES[scope]) for kind in kinds)
        for scope, pattern in _WORDS.items()
    }
    if hits[FlowScope.GLOBAL] == hits[FlowScope.LOCAL]:
        return FlowScope.ANY.value
    return max(hits, key=hits.__getitem__).value

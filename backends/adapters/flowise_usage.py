"""Token usage as Flowise reports it.

Observed on 3.1.4 with an OpenAI-compatible LLM: each AGENTFLOW LLM node reports
its own in ``agentFlowExecutedData[].data.output.usageMetadata`` (``input_tokens``,
``output_tokens``, ``total_tokens``, and ``total_cost`` in US dollars when the
model is in Flowise's price list); nothing adds them up, so the adapter does. A
CHATFLOW's answer carries no usage at all.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from backends.adapters.base import Usage, money, sum_usage, token_count


def usage_metadata(metadata: Any) -> Usage | None:
    """One LLM call's usage from Flowise's ``usageMetadata`` (LangChain's usage_metadata,
    plus Flowise's own ``total_cost`` when it knows the model's price); None if absent.

    Flowise leaves out a count that is zero (an empty prompt had no ``input_tokens``),
    so a missing count stays None rather than being guessed.
    """
    if not isinstance(metadata, dict):
        return None
    usage = Usage(
        prompt_tokens=token_count(metadata.get("input_tokens")),
        completion_tokens=token_count(metadata.get("output_tokens")),
        total_tokens=token_count(metadata.get("total_tokens")),
        cost=money(metadata.get("total_cost")),
    )
    return None if usage == Usage(None, None, None) else usage


def executed_data_usage(executed: Any) -> Usage | None:
    """The summed usage of every node in ``agentFlowExecutedData`` (a list of
    ``{"data": {"output": {"usageMetadata": {...}}}}``); None when no node reported any,
    as with LLM-free flows and CHATFLOWs, whose answers have no such list."""
    if not isinstance(executed, list):
        return None
    return sum_usage(
        usage_metadata(node["data"]["output"].get("usageMetadata"))
        for node in executed
        if isinstance(node, dict)
        and isinstance(node.get("data"), dict)
        and isinstance(node["data"].get("output"), dict)
    )


def stream_usage(executed: Any, streamed: Sequence[Usage | None]) -> Usage | None:
    """A stream's usage: from its last ``agentFlowExecutedData`` event, else the sum of
    its ``usageMetadata`` events.

    The ``usageMetadata`` event comes only from a node that streams, i.e. the last LLM
    node, when its model has streaming on, and without the cost; the executed data
    covers every node. So the events are only a fallback for a stream without it.
    """
    return executed_data_usage(executed) or sum_usage(streamed)

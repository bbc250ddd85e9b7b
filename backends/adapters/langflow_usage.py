"""Token usage as Langflow reports it.

Observed on 1.13 with the OpenAI component: a chat output's message carries
``properties.usage`` (``input_tokens``, ``output_tokens``, ``total_tokens``), which
Langflow has already summed over every LLM component upstream of it; it reports
no cost. Without an LLM the field is null.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from backends.adapters.base import Usage, sum_usage, token_count


def message_usage(usage: Any) -> Usage | None:
    """One message's ``properties.usage`` (``{"input_tokens", "output_tokens",
    "total_tokens"}``); None when it is null or holds no count."""
    if not isinstance(usage, dict):
        return None
    found = Usage(
        prompt_tokens=token_count(usage.get("input_tokens")),
        completion_tokens=token_count(usage.get("output_tokens")),
        total_tokens=token_count(usage.get("total_tokens")),
    )
    return None if found == Usage(None, None, None) else found


def run_usage(run_response: Mapping[str, Any]) -> Usage | None:
    """The token usage of a run: ``outputs[].outputs[].results.message.properties.usage``.

    Each chat output's figure already sums every LLM upstream of it, so several LLMs
    in a chain are counted by Langflow, not here. Several chat outputs are added up,
    but once per producing component (``properties.source.id``): by Langflow's code,
    two outputs fed by the same LLM carry the same figure. The per-component
    ``token_usage`` field is not read: it is null on chat outputs and, where set
    (``output_type=debug``), is already inside the chat output's figure.
    """
    by_source: dict[str, Usage | None] = {}
    for index, result in enumerate(_results(run_response)):
        results = result.get("results")
        message = results.get("message") if isinstance(results, dict) else None
        if not isinstance(message, dict) or not isinstance(message.get("properties"), dict):
            continue
        properties = message["properties"]
        source = properties.get("source")
        source_id = source.get("id") if isinstance(source, dict) else None
        key = str(source_id or result.get("component_id") or index)
        by_source.setdefault(key, message_usage(properties.get("usage")))
    return sum_usage(by_source.values())


def _results(run_response: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Every per-component result of a run (``outputs[].outputs[]``) that is an object."""
    runs = run_response.get("outputs") if isinstance(run_response, Mapping) else None
    if not isinstance(runs, list):
        return []
    return [
        result
        for run in runs
        if isinstance(run, dict) and isinstance(run.get("outputs"), list)
        for result in run["outputs"]
        if isinstance(result, dict)
    ]

"""Seed 004's query router as a service: route, patterns, status."""

from __future__ import annotations

import logging
import time
from typing import Any

from django.conf import settings

from routing.answering.classify import decide_query_type
from routing.classification import llm
from routing.models import ScopePattern
from routing.selection.state import current_state, routing_state

logger = logging.getLogger(__name__)


async def route_query_type(question: str, *, tenant_slug: str) -> dict[str, Any]:
    """Classify a question's breadth; the tenant comes from the caller's API key (AC 8)."""
    started = time.perf_counter()
    state = await current_state()
    decision = await decide_query_type(state, question)
    elapsed = round((time.perf_counter() - started) * 1000, 3)
    logger.info(
        "query type %s (%.2f, %s) for tenant %s in %.2f ms",
        decision.query_type,
        decision.confidence,
        decision.method,
        tenant_slug,
        elapsed,
    )
    return {**decision.as_dict(), "tenant": tenant_slug, "processing_time_ms": elapsed}


def patterns() -> dict[str, Any]:
    rows = ScopePattern.objects.order_by("scope", "-weight", "pattern")
    return {
        scope: [
            {"pattern": p.pattern, "kind": p.kind, "weight": p.weight, "enabled": p.enabled}
            for p in rows
            if p.scope == scope
        ]
        for scope in ("global", "local")
    }


def status() -> dict[str, Any]:
    state = routing_state()
    config = llm.query_type_llm_config()
    return {
        "enabled": settings.QUERY_ROUTING_ENABLED,
        "use_llm": config is not None,
        "llm_model": config.model if config is not None else None,
        "confidence_threshold": settings.QUERY_ROUTING_CONFIDENCE_THRESHOLD,
        "patterns": {scope: len(rules) for scope, rules in state.rules.scopes.items()},
    }

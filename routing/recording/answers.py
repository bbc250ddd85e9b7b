"""Answers kept for a while, for when every backend is down (seed 000's cached fallback)."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from flywheel.cache import shared_cache

ANSWER_CACHE_KEY = "flywheel:answer:{tenant}:{intent}:{digest}"


@dataclass(frozen=True)
class CachedAnswer:
    """An answer kept for the policy's TTL, for when every backend is down."""

    tenant_id: int
    intent: str
    question: str
    value: dict[str, Any]  # {"answer", "backend", "flow"}
    ttl: int


def _answer_key(tenant_id: int, intent: str, question: str) -> str:
    normalised = " ".join(question.lower().split())
    digest = hashlib.sha256(normalised.encode()).hexdigest()[:32]
    return ANSWER_CACHE_KEY.format(tenant=tenant_id, intent=intent, digest=digest)


def answers_remember(entries: Sequence[CachedAnswer]) -> None:
    """Cache answers, one round trip per distinct TTL (in practice: one)."""
    by_ttl: dict[int, dict[str, dict[str, Any]]] = {}
    for entry in entries:
        key = _answer_key(entry.tenant_id, entry.intent, entry.question)
        by_ttl.setdefault(entry.ttl, {})[key] = entry.value
    for ttl, values in by_ttl.items():
        shared_cache().set_many(values, timeout=ttl)


def answer_recall(tenant_id: int, intent: str, question: str) -> dict[str, Any] | None:
    """A fresh earlier answer to the same question and intent, for when every backend is down."""
    found = shared_cache().get(_answer_key(tenant_id, intent, question))
    return found if isinstance(found, dict) else None

"""Decisions written behind the answer: grouped writes, hurrying, the shared cache client."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Sequence
from typing import Any

import pytest
from django.core.cache import caches

from analytics.models import RoutingDecision
from flywheel.cache import shared_cache
from flywheel.env import as_cache
from flywheel.models import Tenant
from routing import recording
from routing.models import Turn
from routing.recording import (
    CachedAnswer,
    DecisionData,
    answer_recall,
    drain,
    record_later,
    session_settled,
)

pytestmark = pytest.mark.django_db(transaction=True)


def decision(tenant: Tenant, session_id: uuid.UUID | None = None, **fields: Any) -> DecisionData:
    return DecisionData(
        request_id=uuid.uuid4(),
        tenant_id=tenant.pk,
        question="What is a flywheel?",
        outcome="success",
        session_id=session_id,
        intent="general",
        **fields,
    )


@pytest.fixture
def batches(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The size of every batch the writer threads write."""
    sizes: list[int] = []
    write = recording.decisions_record

    def counting(batch: Sequence[DecisionData], **kwargs: Any) -> Any:
        sizes.append(len(batch))
        return write(batch, **kwargs)

    monkeypatch.setattr(recording, "decisions_record", counting)
    return sizes


def test_decisions_arriving_together_are_written_in_one_batch(
    tenant: Tenant, batches: list[int]
) -> None:
    for _ in range(5):
        record_later(decision(tenant), performance_window=10)
    drain()

    assert batches == [5]
    assert RoutingDecision.objects.count() == 5


def test_a_conversation_does_not_wait_for_the_gathering(
    tenant: Tenant, batches: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(recording._Writer, "GATHER_SECONDS", 60.0)
    session = uuid.uuid4()
    record_later(
        decision(tenant, session, answer="A flywheel stores energy."), performance_window=10
    )

    async def settle() -> None:
        await asyncio.wait_for(session_settled(session), timeout=5)

    asyncio.run(settle())

    assert batches == [1]
    assert Turn.objects.get(session_id=session).answer == "A flywheel stores energy."


def test_the_answer_is_cached_by_the_writer(tenant: Tenant) -> None:
    entry = CachedAnswer(
        tenant_id=tenant.pk,
        intent="general",
        question="What  is a FLYWHEEL?",
        value={"answer": "A wheel.", "backend": "fw", "flow": "any"},
        ttl=60,
    )
    record_later(decision(tenant), performance_window=10, answer=entry)
    drain()

    assert answer_recall(tenant.pk, "general", "what is a flywheel?") == entry.value


def test_a_failing_cache_loses_no_decision(tenant: Tenant, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(entry: CachedAnswer) -> None:
        raise ConnectionError("cache down")

    monkeypatch.setattr(recording, "answer_remember", broken)
    entry = CachedAnswer(tenant.pk, "general", "q", {"answer": "a"}, 60)
    record_later(decision(tenant), performance_window=10, answer=entry)
    drain()

    assert RoutingDecision.objects.count() == 1


def test_a_redis_cache_url_uses_one_client_per_pool() -> None:
    config = as_cache("redis://127.0.0.1:6379/1")
    assert config["BACKEND"] == "flywheel.redis_cache.RedisCache"

    cache: Any = caches.create_connection("default")  # scripts/test.sh sets a Redis CACHE_URL
    assert type(cache).__module__ == "flywheel.redis_cache"
    client = cache._cache.get_client("k", write=True)
    assert cache._cache.get_client("other", write=True) is client
    shared_cache().set("flywheel:test:one-client", 1, 10)
    assert shared_cache().get("flywheel:test:one-client") == 1

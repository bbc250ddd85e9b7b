"""shared_cache_set: cache writes from many coroutines, stored together off the event loop."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from flywheel import cache as cache_module
from flywheel.cache import shared_cache, shared_cache_set


@pytest.fixture
def round_trips(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """Every group of writes the shared cache (Redis, in the test suite) receives from an
    event loop, passed through."""
    seen: list[dict[str, Any]] = []
    real = shared_cache().set_many_async

    async def set_many_async(values: dict[str, Any], timeout: int | None = None) -> None:
        seen.append(dict(values))
        await real(values, timeout)

    monkeypatch.setattr(shared_cache(), "set_many_async", set_many_async)
    return seen


def test_concurrent_writes_all_land_in_a_few_round_trips(round_trips: list[dict[str, Any]]) -> None:
    async def burst() -> None:
        await asyncio.gather(
            *(shared_cache_set(f"flywheel:test:burst:{i}", {"n": i}, 60) for i in range(300))
        )

    asyncio.run(burst())

    stored = shared_cache().get_many([f"flywheel:test:burst:{i}" for i in range(300)])
    assert stored == {f"flywheel:test:burst:{i}": {"n": i} for i in range(300)}
    assert sum(len(trip) for trip in round_trips) == 300
    assert len(round_trips) <= 3, f"{len(round_trips)} round trips for one burst"


def test_each_write_keeps_its_own_timeout() -> None:
    async def write() -> None:
        await asyncio.gather(
            shared_cache_set("flywheel:test:short", "s", 1),
            shared_cache_set("flywheel:test:long", "l", 60),
        )

    asyncio.run(write())

    client: Any = shared_cache()
    ttls = {}
    for name in ("short", "long"):
        key = client.make_key(f"flywheel:test:{name}")
        ttls[name] = client._cache.get_client(key).ttl(key)
    assert 0 < ttls["short"] <= 1
    assert 1 < ttls["long"] <= 60


def test_a_failing_cache_reaches_every_writer_and_the_next_write_goes_through(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real = cache_module._set_groups

    async def down(groups: Any) -> None:
        raise ConnectionError("cache down")

    async def burst() -> list[BaseException | None]:
        return await asyncio.gather(
            *(shared_cache_set(f"flywheel:test:down:{i}", i, 60) for i in range(5)),
            return_exceptions=True,
        )

    monkeypatch.setattr(cache_module, "_set_groups", down)
    results = asyncio.run(burst())
    monkeypatch.setattr(cache_module, "_set_groups", real)

    assert all(isinstance(r, ConnectionError) for r in results), results

    async def again() -> None:
        await shared_cache_set("flywheel:test:down:0", "back", 60)

    asyncio.run(again())
    assert shared_cache().get("flywheel:test:down:0") == "back"


def test_a_writer_alone_writes_at_once_and_others_still_group(
    round_trips: list[dict[str, Any]],
) -> None:
    async def alone_then_together() -> None:
        await shared_cache_set("flywheel:test:alone", "a", 60, alone=True)
        assert shared_cache().get("flywheel:test:alone") == "a"
        await asyncio.gather(
            *(shared_cache_set(f"flywheel:test:crowd:{i}", i, 60) for i in range(50))
        )

    asyncio.run(alone_then_together())

    assert sum(len(trip) for trip in round_trips) == 50  # the lone write took no group
    assert len(round_trips) <= 3

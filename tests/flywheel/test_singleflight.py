"""SingleFlight: callers arriving while a load runs share it; cold memos are filled once."""

from __future__ import annotations

import asyncio

import pytest

from flywheel.singleflight import SingleFlight
from routing.answering import execution
from routing.selection.scoring import BackendEntry


async def test_concurrent_callers_share_one_load() -> None:
    flight: SingleFlight[int] = SingleFlight()
    loads = 0

    async def load() -> int:
        nonlocal loads
        loads += 1
        await asyncio.sleep(0.01)
        return 42

    results = await asyncio.gather(*(flight.do("k", load) for _ in range(50)))

    assert results == [42] * 50
    assert loads == 1


async def test_a_failed_load_fails_every_waiter_and_the_next_call_loads_again() -> None:
    flight: SingleFlight[int] = SingleFlight()
    calls = 0

    async def load() -> int:
        nonlocal calls
        calls += 1
        await asyncio.sleep(0.01)
        if calls == 1:
            raise LookupError("first load fails")
        return 7

    results = await asyncio.gather(
        *(flight.do("k", load) for _ in range(5)), return_exceptions=True
    )
    assert all(isinstance(r, LookupError) for r in results)

    assert await flight.do("k", load) == 7
    assert calls == 2


async def test_a_waiter_that_gives_up_does_not_cancel_the_load_for_the_others() -> None:
    flight: SingleFlight[str] = SingleFlight()

    async def load() -> str:
        await asyncio.sleep(0.02)
        return "done"

    impatient = asyncio.ensure_future(flight.do("k", load))
    patient = asyncio.ensure_future(flight.do("k", load))
    await asyncio.sleep(0)
    impatient.cancel()

    assert await patient == "done"


@pytest.mark.django_db(transaction=True)
async def test_a_burst_to_a_cold_backend_reads_its_credentials_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from backends.models import Backend
    from flywheel.asyncdb import db

    backend = await db(Backend.objects.create)(
        name="fw", kind="flowise", base_url="http://fw.test", api_key="sk-secret"
    )
    reads = 0
    load = execution._load_config

    def counting_load(entry: BackendEntry) -> object:
        nonlocal reads
        reads += 1
        return load(entry)

    monkeypatch.setattr(execution, "_load_config", counting_load)
    entry = BackendEntry(
        id=backend.pk, name="fw", kind="flowise", weight=1.0, tenant_id=None, flows=(), version="1"
    )

    configs = await asyncio.gather(*(execution.config_for(entry) for _ in range(100)))

    assert reads == 1
    assert {c.base_url for c in configs} == {"http://fw.test"}

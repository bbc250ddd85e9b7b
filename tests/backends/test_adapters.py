"""run_sync: async backend calls from sync code close the clients of a loop they own."""

from __future__ import annotations

import asyncio

from asgiref.sync import sync_to_async

from backends.adapters import _pools, get_adapter, run_sync
from backends.adapters.base import BackendConfig

CONFIG = BackendConfig(
    id=1,
    name="fw",
    kind="flowise",
    base_url="http://127.0.0.1:9",
    timeout_seconds=5,
)


async def _open_a_client() -> asyncio.AbstractEventLoop:
    get_adapter(CONFIG)
    loop = asyncio.get_running_loop()
    assert loop in _pools
    return loop


def test_a_call_on_a_loop_of_its_own_closes_its_clients() -> None:
    loop = run_sync(_open_a_client)

    assert loop not in _pools


def test_a_call_inside_a_loop_that_keeps_clients_leaves_them_pooled() -> None:
    async def server() -> None:
        loop = await _open_a_client()  # the server's loop already pools a client
        adapter = get_adapter(CONFIG)
        await sync_to_async(run_sync)(_open_a_client)  # as a sync DRF view under the server
        assert get_adapter(CONFIG) is adapter
        assert loop in _pools

    asyncio.run(server())

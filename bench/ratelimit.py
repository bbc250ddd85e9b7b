"""The rate limiter's own cost per request, against a real Redis.

Prints p50/p99 of one api_key_admit (the per-key count: far from the limit, kept in
the process and sent in a batch every 50 ms, one pipelined Lua call per batch) beside
a bare Redis PING and a cache GET for scale, the same check from an event loop
on the loop and through a worker thread, and the cost with every limit off.
No database: the key is an unsaved row.

Needs Redis (REDIS_URL, default redis://127.0.0.1:6379; database 3, under
its own key prefix, whose keys it deletes when done).
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
REDIS = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379")
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "flywheel.settings")
os.environ["CACHE_URL"] = f"{REDIS}/3"
os.environ["FLYWHEEL_CACHE_PREFIX"] = "bench_ratelimit"
os.environ.setdefault("FLYWHEEL_VAR_DIR", str(Path(__file__).resolve().parent.parent / "var/bench"))

import django  # noqa: E402

django.setup()

from django.test import override_settings  # noqa: E402

from bench.common import summary  # noqa: E402
from flywheel.cache import shared_cache  # noqa: E402
from flywheel.models import ApiKey  # noqa: E402
from flywheel.ratelimit import api_key_admit  # noqa: E402

N = 20_000
WARM = 500


def timed(call: Callable[[], object], n: int = N) -> list[float]:
    for _ in range(WARM):
        call()
    timings = []
    for _ in range(n):
        started = time.perf_counter()
        call()
        timings.append((time.perf_counter() - started) * 1000)
    return timings


async def on_loop(call: Callable[[], object], *, thread: bool, n: int = N // 4) -> list[float]:
    loop = asyncio.get_running_loop()
    timings = []
    for i in range(WARM + n):
        started = time.perf_counter()
        if thread:
            await loop.run_in_executor(None, call)
        else:
            call()
        if i >= WARM:
            timings.append((time.perf_counter() - started) * 1000)
    return timings


def show(label: str, timings: list[float]) -> None:
    print(f"{label + ', ms:':<48}{summary(timings)}")


def main() -> None:
    cache = shared_cache()
    client = cache._cache.get_client(write=True)
    key = ApiKey(id=1, rate_limit="1000000000/minute")  # counted, never refused

    def admit() -> None:
        api_key_admit(api_key=key)

    cache.set("bench:probe", 1, 60)
    try:
        show("Redis PING", timed(client.ping))
        show("cache GET (shared_cache)", timed(lambda: cache.get("bench:probe")))
        show("api_key_admit (the key's count)", timed(admit))
        show("  the same from a coroutine, on the loop", asyncio.run(on_loop(admit, thread=False)))
        show("  the same from a coroutine, via a thread", asyncio.run(on_loop(admit, thread=True)))
        with override_settings(RATE_LIMIT=None, AUTH_FAILURE_LIMIT=None):
            off = ApiKey(id=2)
            show("api_key_admit, every limit off", timed(lambda: admit_off(off)))
    finally:
        ours = list(client.scan_iter(match=cache.make_key("*"), count=1000))
        if ours:
            client.delete(*ours)


def admit_off(key: ApiKey) -> None:
    api_key_admit(api_key=key)


if __name__ == "__main__":
    main()

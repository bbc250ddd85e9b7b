"""Liveness and readiness: is the process up, and can it reach what it needs?"""

from __future__ import annotations

import math
import secrets
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, wait

from django.conf import settings
from django.core.cache import cache
from django.db import connection, connections

from flywheel.celery import app as celery_app


def _check_database() -> None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
        cursor.fetchone()


def _check_cache() -> None:
    key = f"readyz:{secrets.token_hex(8)}"
    cache.set(key, "1", timeout=10)
    try:
        if cache.get(key) != "1":
            raise RuntimeError("a value written to the cache could not be read back")
    finally:
        cache.delete(key)


def _check_broker() -> None:
    with celery_app.connection_for_write() as conn:
        conn.ensure_connection(max_retries=1, timeout=math.ceil(settings.READINESS_TIMEOUT_SECONDS))


CHECKS: dict[str, Callable[[], None]] = {
    "database": _check_database,
    "cache": _check_cache,
    "broker": _check_broker,
}


# The checks run here, side by side, so a dependency that hangs (a database pool
# waiting 10 s for a connection that will not come) holds up none of the others, nor
# the answer. A few threads: checks still hung from earlier probes wait their turn.
_checkers = ThreadPoolExecutor(max_workers=2 * len(CHECKS), thread_name_prefix="readyz")


def _run(check: Callable[[], None]) -> None:
    try:
        check()
    finally:
        connections.close_all()  # this thread's, back to the pool


def readiness_report() -> dict[str, str]:
    """Return ``{dependency: "ok" | "down: <reason>"}`` for each dependency, within
    about settings.READINESS_TIMEOUT_SECONDS: a check that has not answered by then
    is down."""
    timeout = settings.READINESS_TIMEOUT_SECONDS
    running = {name: _checkers.submit(_run, check) for name, check in CHECKS.items()}
    done, _ = wait(running.values(), timeout=timeout)
    report: dict[str, str] = {}
    for name, future in running.items():
        if future not in done:
            report[name] = f"down: no answer within {timeout:g} s"
        elif (err := future.exception()) is not None:
            report[name] = f"down: {type(err).__name__}: {err}"
        else:
            report[name] = "ok"
    return report

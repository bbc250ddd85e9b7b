"""Liveness and readiness: is the process up, and can it reach what it needs?"""

from __future__ import annotations

import math
import secrets
from collections.abc import Callable

from django.conf import settings
from django.core.cache import cache
from django.db import connection

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


def readiness_report() -> dict[str, str]:
    """Return ``{dependency: "ok" | "down: <reason>"}`` for each dependency."""
    report: dict[str, str] = {}
    for name, check in CHECKS.items():
        try:
            check()
        except Exception as err:
            report[name] = f"down: {type(err).__name__}: {err}"
        else:
            report[name] = "ok"
    return report

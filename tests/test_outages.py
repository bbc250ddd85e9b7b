"""Outages of the database and the cache degrade service instead of failing it."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from django.db import connection, connections


def _in_a_thread(work: Any) -> Any:
    """Run ``work`` on a thread of its own: it checks a connection out of the pool
    (as each request's database work does under ASGI) and hands it back."""
    result: dict[str, Any] = {}

    def run() -> None:
        try:
            result["value"] = work()
        except Exception as err:
            result["error"] = err
        finally:
            connections.close_all()

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    if "error" in result:
        raise result["error"]
    return result["value"]


def _one() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
        return int(cursor.fetchone()[0])


@pytest.mark.django_db(transaction=True)
def test_the_pool_checks_a_connection_before_handing_it_out() -> None:
    """A database restart leaves the pool's idle connections dead: the next checkout
    must get a live one, not an error (it used to take ~25 s of 500s)."""
    assert _in_a_thread(_one) == 1  # the pool now holds an idle connection
    with connection.cursor() as cursor:  # what a restart does to every other connection
        cursor.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
        assert cursor.fetchone()[0] >= 1
    assert [_in_a_thread(_one) for _ in range(4)] == [1, 1, 1, 1]

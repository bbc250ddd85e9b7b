"""Shared fixtures. The suite runs on PostgreSQL and Redis (see scripts/test.sh)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.db import connection
from rest_framework.test import APIClient

from backends.models import Backend
from flywheel.models import Tenant
from flywheel.services import api_key_create
from routing.classification import learned, training

# Shared fixtures that live beside their helpers.
pytest_plugins = ["tests.routing_world"]


def pytest_sessionstart(session: pytest.Session) -> None:
    if connection.vendor != "postgresql":
        pytest.exit(
            f"The test suite runs on PostgreSQL, not {connection.vendor}: "
            "run it with `make test` or set DATABASE_URL=postgres://...",
            returncode=2,
        )
    # The test database is created afresh: what an earlier, killed run left in the
    # decision spool belongs to a database that is gone, and must not be replayed.
    shutil.rmtree(settings.SPOOL_DIR, ignore_errors=True)
    # Servers the tests start on the test database (uvicorn, runmcp) spool elsewhere:
    # what one stopped mid-write leaves belongs to a test whose rows are gone, and this
    # process's writer, replaying its own spool directory every 30 s, would write it
    # into a later test, even while that test's database is being flushed (a deadlock
    # seen once in CI). The variable is read at start-up, so only they see it.
    servers_spool = Path(settings.SPOOL_DIR).with_name("spool-servers")
    shutil.rmtree(servers_spool, ignore_errors=True)
    os.environ["FLYWHEEL_SPOOL_DIR"] = str(servers_spool)


@pytest.fixture(autouse=True, scope="session")
def _each_example_set_trained_once() -> Iterator[None]:
    """Training a classifier costs seconds (a cross-validation and a fit, most of the
    suite's time when each test trained afresh), and the same examples train the same
    model (fixed random state): the suite trains each set of examples once per worker.
    What calls routing.classification.learned.train itself (its own tests) is not
    memoised; classifier_train still stores, announces and keeps versions as always."""
    trained: dict[tuple[Any, ...], learned.LearnedModel] = {}

    def train_once(
        texts: Any, labels: Any, *, folds: int = 5, exact: dict[str, str] | None = None
    ) -> learned.LearnedModel:
        key = (tuple(texts), tuple(labels), folds, tuple(sorted((exact or {}).items())))
        if key not in trained:
            trained[key] = learned.train(texts, labels, folds=folds, exact=exact)
        return trained[key]

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(training, "train", train_once)
        yield


@pytest.fixture
def tenant(db) -> Tenant:
    return Tenant.objects.create(name="Acme", slug="acme")


@pytest.fixture
def raw_api_key(tenant: Tenant) -> str:
    _, raw_key = api_key_create(tenant=tenant, name="tests")
    return raw_key


@pytest.fixture
def api_client(raw_api_key: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw_api_key}")
    return client


@pytest.fixture
def backend(db) -> Backend:
    return Backend.objects.create(
        name="flowise-main",
        kind="flowise",
        base_url="http://127.0.0.1:3000",
        api_key="sk-flowise-SECRET-do-not-render",
    )


def clear_own_cache_keys(cache: Any) -> None:
    """Empty the cache of this checkout's keys only: a Redis may be shared (never FLUSHDB)."""
    client_of = getattr(getattr(cache, "_cache", None), "get_client", None)
    if client_of is None:
        cache.clear()
        return
    client = client_of(write=True)
    keys = list(client.scan_iter(match=cache.make_key("*"), count=1000))
    if keys:
        client.delete(*keys)


@pytest.fixture(autouse=True)
def _fresh_routing_state() -> Iterator[None]:
    """Each test starts with empty shared caches and no in-process routing memo."""
    from django.core.cache import cache

    from flywheel.outage import database_outage
    from flywheel.services import api_keys_forget_memo
    from routing.answering import execution
    from routing.classification.embeddings import embeddings_forget
    from routing.recording.performance import evidence_forget
    from routing.selection import learning, state
    from routing.selection.breaker import breaker_forget

    clear_own_cache_keys(cache)
    breaker_forget()
    embeddings_forget()
    learning.book.forget()
    evidence_forget()
    state.forget()
    execution.forget_configs()
    api_keys_forget_memo()
    database_outage.answered()  # an outage an earlier test simulated is over
    yield
    database_outage.answered()  # the test's database is flushed next: it is there
    evidence_forget()  # no fold left to run once the test's database is gone
    state.forget()
    execution.forget_configs()
    api_keys_forget_memo()


@pytest.fixture(autouse=True)
def _mockable_network(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """Backends, the LLM and embeddings are mocked with httpx's mocks (respx), so tests
    that mock send through httpx (tests/httpx_transport.py); live tests keep the
    product's transport, which tests/backends/http/test_transport.py covers on real sockets."""
    if request.node.get_closest_marker("live") is None:
        from backends.http import client as http
        from tests.httpx_transport import HttpxTransport

        monkeypatch.setattr(http, "network_transport", HttpxTransport)


@pytest.fixture(autouse=True)
def _decisions_written() -> Iterator[None]:
    """Decisions are written behind the answers: let each test's writes land before it ends."""
    from routing.recording.writer import drain

    yield
    drain()


@pytest.fixture(scope="session", autouse=True)
def _close_connection_pools(django_db_setup, django_db_blocker) -> Iterator[None]:
    """Pooled connections stay open between uses; close the pools before the test
    database is dropped (this teardown runs before django_db_setup's)."""
    yield
    from django.db import connections

    for conn in connections.all():
        if hasattr(conn, "close_pool"):
            conn.close_pool()


@pytest.fixture(scope="session", autouse=True)
def _flushed_by_delete() -> Iterator[None]:
    """A transactional test ends by emptying every table (Django's flush). PostgreSQL's
    TRUNCATE makes new files for each of the database's 250-odd relations, the day
    partitions' among them: about 0.45 s a test on this suite's machines, where deleting
    a test's few rows in one transaction takes 10 ms (Django's MySQL backend flushes so
    for the same reason). The foreign keys Django makes are checked at commit, by
    which time every table is empty. A flush that resets sequences still truncates."""
    from django.db.backends.base.operations import BaseDatabaseOperations
    from django.db.backends.postgresql.operations import DatabaseOperations

    truncate = DatabaseOperations.sql_flush

    def sql_flush(
        self: BaseDatabaseOperations,
        style: Any,
        tables: Sequence[str],
        *,
        reset_sequences: bool = False,
        allow_cascade: bool = False,
    ) -> list[str]:
        if reset_sequences or not tables:
            return truncate(
                self, style, tables, reset_sequences=reset_sequences, allow_cascade=allow_cascade
            )
        return [f"DELETE FROM {self.quote_name(table)}" for table in tables]  # noqa: S608 - table names

    DatabaseOperations.sql_flush = sql_flush  # type: ignore[method-assign]
    yield
    DatabaseOperations.sql_flush = truncate  # type: ignore[method-assign]

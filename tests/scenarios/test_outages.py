"""Outages of the database and the cache degrade service instead of failing it."""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any, cast

import httpx
import psycopg
import psycopg_pool
import pytest
from asgiref.sync import sync_to_async
from django.db import connection, connections
from django.db.backends.postgresql.base import DatabaseWrapper
from django.test import override_settings
from django.utils import timezone
from redis.exceptions import ConnectionError as RedisConnectionError

from flywheel import outage, services
from flywheel.asgi import application
from flywheel.asyncdb import db
from flywheel.cache import DELETE_AGAIN_SECONDS, DegradingCache, shared_cache
from flywheel.errors import AuthenticationError
from flywheel.models import ApiKey
from flywheel.services import (
    api_key_authenticate,
    api_key_recall,
    api_key_revoke,
    api_key_uses_settle,
    api_keys_forget_memo,
)
from routing.answering.sessions import SESSION_KEY, session_cached
from routing.classification import rules, training
from routing.classification.cascade import classify_by_rules
from routing.install import defaults_load
from routing.models import ClassifierKind, Intent, IntentPattern, RoutingDecision, Turn
from routing.recording import writer as recording
from routing.recording.spool import Spool
from routing.recording.writer import drain
from routing.selection import state as state_module
from tests.disks import FillingDisk
from tests.routing_world import World

REVIEW = "Please review my pull request"
CLOSED_PORT_REDIS = "redis://127.0.0.1:1/0"  # nothing listens on port 1


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


def _cache_down() -> Any:
    return override_settings(
        CACHES={
            "default": {
                "BACKEND": "django.core.cache.backends.redis.RedisCache",
                "LOCATION": CLOSED_PORT_REDIS,
            }
        }
    )


async def _query(raw_api_key: str, payload: dict[str, Any]) -> httpx.Response:
    transport = httpx.ASGITransport(app=cast(Any, application))
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
        return await client.post(
            "/api/v1/query", json=payload, headers={"Authorization": f"Bearer {raw_api_key}"}
        )


@pytest.mark.django_db(transaction=True)
async def test_with_the_cache_down_a_conversation_is_answered_and_recorded(
    world: World, raw_api_key: str
) -> None:
    with _cache_down():
        first = await _query(raw_api_key, {"question": REVIEW})
        assert first.status_code == 200, first.json()
        session_id = first.json()["session_id"]
        second = await _query(raw_api_key, {"question": REVIEW, "session_id": session_id})
        assert second.status_code == 200, second.json()
        await sync_to_async(drain)()

    outcomes = await db(
        lambda: list(RoutingDecision.objects.order_by("id").values_list("outcome", flat=True))
    )()
    assert outcomes == ["success", "success"]
    turns = await db(Turn.objects.filter(session_id=session_id).count)()
    assert turns == 2


class _Switchable:
    """The real shared cache, with a switch that makes every call fail as a Redis
    that was killed does (redis-py's ConnectionError)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.down = False

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self.inner, name)
        if not callable(attribute):
            return attribute

        def call(*args: Any, **kwargs: Any) -> Any:
            if self.down:
                raise RedisConnectionError("Error 111 connecting to 127.0.0.1:6379.")
            return attribute(*args, **kwargs)

        return call


@pytest.fixture
def switchable_cache(monkeypatch: pytest.MonkeyPatch) -> _Switchable:
    cache = shared_cache()
    switch = _Switchable(cache.inner)
    monkeypatch.setattr(cache, "inner", switch)
    monkeypatch.setattr(DegradingCache, "RETRY_SECONDS", 0.0)
    return switch


@pytest.mark.django_db(transaction=True)
async def test_a_conversation_continued_during_an_outage_is_not_read_stale_afterwards(
    world: World, raw_api_key: str, switchable_cache: _Switchable
) -> None:
    first = await _query(raw_api_key, {"question": REVIEW})
    session_id = first.json()["session_id"]
    # One-shot until continued: the second question starts the session (and its cache).
    await _query(raw_api_key, {"question": "Then the docs?", "session_id": session_id})
    await sync_to_async(drain)()
    tenant_id = await db(lambda: RoutingDecision.objects.first().tenant_id)()  # type: ignore[union-attr]
    key = uuid.UUID(session_id)
    assert len(session_cached(tenant_id=tenant_id, session_id=key) or []) == 2

    switchable_cache.down = True
    during = await _query(raw_api_key, {"question": "And the tests?", "session_id": session_id})
    assert during.status_code == 200, during.json()
    await sync_to_async(drain)()
    switchable_cache.down = False

    # The cache still holds the two turns it had before the outage: the
    # first call that reaches it clears that entry, so readers go to the database.
    assert shared_cache().get("flywheel:probe") is None
    assert session_cached(tenant_id=tenant_id, session_id=key) is None
    after = await _query(raw_api_key, {"question": "Anything else?", "session_id": session_id})
    assert after.status_code == 200, after.json()
    cached = session_cached(tenant_id=tenant_id, session_id=key) or []
    assert [t.question for t in cached] == [
        REVIEW,
        "Then the docs?",
        "And the tests?",
        "Anything else?",
    ]


@pytest.mark.django_db(transaction=True)
def test_a_revocation_during_an_outage_reaches_the_cache_once_it_answers(
    raw_api_key: str, switchable_cache: _Switchable
) -> None:
    api_key = api_key_authenticate(raw_key=raw_api_key)  # now remembered in the cache
    assert api_key is not None
    api_keys_forget_memo()

    switchable_cache.down = True
    api_key_revoke(api_key=api_key)  # commits, and does not fail on the cache
    assert api_key_recall(raw_key=raw_api_key) is None  # down: the database decides
    switchable_cache.down = False

    api_keys_forget_memo()
    assert api_key_recall(raw_key=raw_api_key) is None
    with pytest.raises(AuthenticationError):
        api_key_authenticate(raw_key=raw_api_key)


def _refused(self: DatabaseWrapper, params: dict[str, Any]) -> Any:
    """How connecting fails while PostgreSQL is stopped."""
    raise psycopg.OperationalError("connection failed: Connection refused")


def _refused_after_the_pool_waits(self: DatabaseWrapper, params: dict[str, Any]) -> Any:
    """How the pool fails while PostgreSQL is stopped: after waiting for a connection
    (its timeout is 10 s; 3 here)."""
    time.sleep(3)
    raise psycopg_pool.PoolTimeout("couldn't get a connection after 3.00 sec")


@pytest.mark.django_db(transaction=True)
async def test_with_the_database_down_a_recent_key_is_answered_and_recorded_later(
    world: World, raw_api_key: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = await _query(raw_api_key, {"question": REVIEW})  # the key and routing are warm
    assert before.status_code == 200, before.json()
    await sync_to_async(drain)()
    # Its use is due to be noted again (once a minute): that write needs the database.
    monkeypatch.setattr(services, "LAST_USED_RESOLUTION", timedelta(0))
    api_keys_forget_memo()

    down = pytest.MonkeyPatch()
    down.setattr(DatabaseWrapper, "get_new_connection", _refused_after_the_pool_waits)
    try:
        started = time.monotonic()
        during = await _query(raw_api_key, {"question": REVIEW})
        took = time.monotonic() - started
        down.setattr(DatabaseWrapper, "get_new_connection", _refused)
        # The conversation is no longer in the cache: reading it needs the database.
        session_id = before.json()["session_id"]
        shared_cache().delete(SESSION_KEY.format(id=session_id))
        session = {"question": REVIEW, "session_id": session_id}
        unreadable = await _query(raw_api_key, session)
        unknown = await _query(
            "fw_00000000_not-a-key-flywheel-has-ever-seen-0000000", {"question": REVIEW}
        )
        await sync_to_async(api_key_uses_settle)()  # it could not note the use: logged
    finally:
        down.undo()
    assert during.status_code == 200, during.json()
    assert took < 2  # noting the key's use waits for the database, the answer does not
    assert took < 2  # noting the key's use waits for the database, the answer does not
    assert unknown.status_code == 503, unknown.json()
    assert unknown.json()["error"]["type"] == "UnavailableError"
    assert unknown.headers["Retry-After"] == "5"
    assert unreadable.status_code == 503, unreadable.json()

    await sync_to_async(drain)(timeout=15)
    outcomes = await db(
        lambda: list(RoutingDecision.objects.order_by("id").values_list("outcome", "error_type"))
    )()
    assert sorted(outcomes) == [("failed", "UnavailableError"), ("success", ""), ("success", "")]


@pytest.mark.django_db(transaction=True)
def test_a_rules_edit_during_an_outage_reaches_every_process_after_it(
    switchable_cache: _Switchable,
) -> None:
    defaults_load()
    here, elsewhere = rules._cache, rules._RuleCache()  # two processes' compiled rules
    monkeypatch = pytest.MonkeyPatch()
    monkeypatch.setattr(rules, "RECHECK_SECONDS", 0.0)
    try:
        before = elsewhere.get()
        assert classify_by_rules(before, "flywheel-outage-word please").intent != "summarize"
        switchable_cache.down = True
        elsewhere.get()  # compiles during the outage, before the edit
        IntentPattern.objects.create(
            intent=Intent.objects.get(slug="summarize"), kind="keyword",
            pattern="flywheel-outage-word", weight=3.0,
        )  # fmt: skip
        here.get()
        switchable_cache.down = False

        shared_cache().get("flywheel:probe")  # this process clears the version it missed
        compiled = elsewhere.get()
    finally:
        monkeypatch.undo()

    assert classify_by_rules(compiled, "flywheel-outage-word please").intent == "summarize"


@pytest.mark.django_db(transaction=True)
def test_a_key_revoked_while_the_cache_missed_it_stops_at_its_next_noted_use(
    raw_api_key: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    api_key = api_key_authenticate(raw_key=raw_api_key)  # remembered in the cache
    ApiKey.objects.filter(pk=api_key.pk).update(revoked_at=timezone.now())  # delete missed
    monkeypatch.setattr(services, "LAST_USED_RESOLUTION", timedelta(0))
    api_keys_forget_memo()

    api_key_authenticate(raw_key=raw_api_key)  # the cache still vouches for it, once
    api_key_uses_settle()  # noting its use finds it revoked, and forgets it
    api_keys_forget_memo()

    assert api_key_recall(raw_key=raw_api_key) is None
    with pytest.raises(AuthenticationError):
        api_key_authenticate(raw_key=raw_api_key)


@pytest.mark.django_db(transaction=True)
def test_a_revoked_keys_forget_lands_after_the_request_caches_the_key(
    raw_api_key: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The request writes the key to the cache while its use is being noted: the thread
    # that finds the key revoked must forget it after that write, not before it.
    api_key = api_key_authenticate(raw_key=raw_api_key)
    ApiKey.objects.filter(pk=api_key.pk).update(revoked_at=timezone.now())  # delete missed
    monkeypatch.setattr(services, "LAST_USED_RESOLUTION", timedelta(0))
    api_keys_forget_memo()
    remember = services._remember_key

    def slow_remember(digest: str, key: ApiKey) -> None:
        time.sleep(0.2)  # the use-noting thread has long run by now
        remember(digest, key)

    monkeypatch.setattr(services, "_remember_key", slow_remember)

    api_key_authenticate(raw_key=raw_api_key)  # the cache still vouches for it, once
    api_key_uses_settle()
    api_keys_forget_memo()

    with pytest.raises(AuthenticationError):
        api_key_authenticate(raw_key=raw_api_key)


@pytest.mark.django_db(transaction=True)
async def test_with_the_spool_disk_full_an_answer_goes_out_only_once_it_is_recorded(
    world: World, raw_api_key: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    warm = await _query(raw_api_key, {"question": REVIEW})  # the key and routing are warm
    assert warm.status_code == 200, warm.json()
    await sync_to_async(drain)()
    monkeypatch.setattr(recording._writer, "_spool", Spool(tmp_path))
    FillingDisk(monkeypatch, tmp_path, room=0)

    kept = await _query(raw_api_key, {"question": REVIEW})
    stored_at_once = await db(RoutingDecision.objects.count)()  # no drain
    down = pytest.MonkeyPatch()
    down.setattr(DatabaseWrapper, "get_new_connection", _refused)
    try:
        refused = await _query(raw_api_key, {"question": REVIEW})
    finally:
        down.undo()

    assert kept.status_code == 200, kept.json()
    assert stored_at_once == 2
    # Before, it was answered, and its decision lived only in the process's memory.
    assert refused.status_code == 503, refused.json()
    assert "answer" not in refused.json()
    assert refused.json()["error"]["type"] == "UnavailableError"
    assert "could not be recorded" in refused.json()["error"]["message"]
    await sync_to_async(drain)(timeout=15)
    outcomes = await db(
        lambda: list(RoutingDecision.objects.order_by("id").values_list("outcome", "error_type"))
    )()
    assert outcomes == [("success", ""), ("success", ""), ("failed", "UnavailableError")]


@pytest.mark.django_db(transaction=True)
def test_a_key_in_constant_use_keeps_authenticating_through_a_long_outage(
    raw_api_key: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In time scaled down sixtyfold (a second for a minute): the key is written back to
    the cache as its use is noted, and outlives that interval, so an outage of any
    length leaves it working. Before, the entry expired as its use fell due, and the
    key stopped a minute into the outage."""
    scale = 60
    monkeypatch.setattr(services, "LAST_USED_RESOLUTION", timedelta(seconds=60 / scale))
    monkeypatch.setattr(services, "AUTH_CACHE_SECONDS", services.AUTH_CACHE_SECONDS // scale)
    time.sleep(DELETE_AGAIN_SECONDS + 0.2)  # the key's creation forgot it once more
    api_keys_forget_memo()
    api_key_authenticate(raw_key=raw_api_key)  # remembered, with its use noted

    down = pytest.MonkeyPatch()
    down.setattr(DatabaseWrapper, "get_new_connection", _refused)
    connections.close_all()  # this thread's connection too: the database is gone
    refused = []
    try:
        ends = time.monotonic() + 3.5  # three and a half "minutes" of outage
        while time.monotonic() < ends:
            api_keys_forget_memo()  # every request reads the shared cache
            try:
                api_key_authenticate(raw_key=raw_api_key)
            except Exception as err:  # what the client would have got
                refused.append(type(err).__name__)
            time.sleep(0.1)
    finally:
        down.undo()
        outage.database_outage.answered()  # back, as the next connection would find
    api_key_uses_settle()

    assert refused == []


@pytest.mark.django_db(transaction=True)
async def test_with_the_database_down_requests_that_need_it_hear_503_at_once(
    world: World, raw_api_key: str
) -> None:
    """Each lookup used to wait the pool's timeout on the shared executor's threads:
    a dozen unknown keys took ~30 s to hear 503 and held up every other request."""
    warm = await _query(raw_api_key, {"question": REVIEW})  # this key is remembered
    assert warm.status_code == 200, warm.json()
    await sync_to_async(drain)()
    unknown = "fw_00000000_not-a-key-flywheel-has-ever-seen-0000000"
    timed: list[tuple[float, int]] = []

    async def ask(key: str) -> None:
        started = time.monotonic()
        answered = await _query(key, {"question": REVIEW})
        timed.append((time.monotonic() - started, answered.status_code))

    down = pytest.MonkeyPatch()
    down.setattr(DatabaseWrapper, "get_new_connection", _refused_after_the_pool_waits)
    try:
        started = time.monotonic()
        await asyncio.gather(*(ask(unknown) for _ in range(12)), ask(raw_api_key))
        took = time.monotonic() - started
    finally:
        down.undo()

    statuses = sorted(status for _, status in timed)
    assert statuses == [200] + [503] * 12
    assert took < 5  # one lookup waited the pool's 3 s; before, 12 of them, six at a time
    assert sorted(seconds for seconds, _ in timed)[-2] < 4  # the rest did not queue
    # The database is back: within a probe or two, everything is answered again.
    returned = time.monotonic()
    while outage.database_outage.down_since is not None and time.monotonic() - returned < 3:
        await _query(unknown, {"question": REVIEW})  # each may be the probe that finds it
        await asyncio.sleep(0.1)
    assert time.monotonic() - returned < 2 * outage.PROBE_SECONDS + 0.5
    back = await _query(raw_api_key, {"question": REVIEW})
    assert back.status_code == 200, back.json()


@pytest.mark.django_db(transaction=True)
async def test_routing_keeps_its_last_state_while_the_database_is_down(
    world: World, raw_api_key: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The routing state is rebuilt every half second from the cache, and what the cache
    lacks (here the learned classifier's version) from the database. With the database
    down, that rebuild failed, and a known key's question was answered 503: seen in a
    CI run where a recheck fell due in the outage."""
    warm = await _query(raw_api_key, {"question": REVIEW})
    assert warm.status_code == 200, warm.json()
    await sync_to_async(drain)()
    monkeypatch.setattr(state_module, "MEMO_SECONDS", 0.0)  # each question rebuilds it
    monkeypatch.setattr(training, "RECHECK_SECONDS", 0.0)  # and rechecks the classifier
    shared_cache().delete(training.VERSION_KEY.format(kind=ClassifierKind.INTENT))

    down = pytest.MonkeyPatch()
    down.setattr(DatabaseWrapper, "get_new_connection", _refused)
    connections.close_all()  # no pooled connection carries on
    try:
        during = await _query(raw_api_key, {"question": REVIEW})
    finally:
        down.undo()

    assert during.status_code == 200, during.json()
    await sync_to_async(drain)(timeout=15)

"""/metrics: what the analytics pages show, in Prometheus' format, for this machine only.

Counters are process-wide and grow across tests, so each test compares the
values before and after what it does.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any, cast
from unittest import mock

import httpx
import pytest
from asgiref.sync import sync_to_async
from django.test import override_settings
from django.utils import timezone
from prometheus_client import REGISTRY
from prometheus_client.parser import text_string_to_metric_families

from backends.models import Backend, BackendHealth
from chatflows.models import Flow
from flywheel.asgi import application
from flywheel.asyncdb import db
from flywheel.metrics import exposition
from flywheel.models import Tenant
from routing.recording.writer import drain
from tests.paths import ROOT
from tests.routing_world import World, refresh

pytestmark = pytest.mark.django_db(transaction=True)
REVIEW = "Please review my pull request"


def _value(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


async def _request(
    method: str, path: str, client: str = "127.0.0.1", **kwargs: Any
) -> httpx.Response:
    transport = httpx.ASGITransport(app=cast(Any, application), client=(client, 40000))
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as http:
        return await http.request(method, path, **kwargs)


def _samples(text: str) -> list[tuple[str, dict[str, str], float]]:
    return [
        (sample.name, sample.labels, sample.value)
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    ]


def _key(name: str, **labels: str) -> tuple[str, tuple[tuple[str, str], ...]]:
    return name, tuple(sorted(labels.items()))


def _scraped(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def _shared(backend: Backend) -> dict[str, str]:
    return {"backend_id": str(backend.pk), "owner": "shared", "backend": backend.name}


async def test_a_routed_question_shows_in_every_count(world: World, raw_api_key: str) -> None:
    fw, lf = _shared(world.fw), _shared(world.lf)
    decided = {**fw, "intent": "code-review", "method": "rules", "outcome": "success"}
    before = (
        _value("flywheel_requests_total", door="rest", status="200"),
        _value("flywheel_decisions_total", **decided),
        _value("flywheel_backend_latency_seconds_count", **fw, result="ok"),
    )

    asked = await _request(
        "POST",
        "/api/v1/query",
        json={"question": REVIEW},
        headers={"Authorization": f"Bearer {raw_api_key}"},
    )
    await sync_to_async(drain)()
    await db(BackendHealth.objects.filter(backend=world.lf).update)(
        cooldown_until=timezone.now() + timedelta(minutes=1)
    )
    scraped = await _request("GET", "/metrics")

    assert asked.status_code == 200, asked.content
    assert scraped.status_code == 200
    assert scraped.headers["content-type"].startswith("text/plain; version=")
    samples = _scraped(scraped.text)
    after = (
        samples[_key("flywheel_requests_total", door="rest", status="200")],
        samples[_key("flywheel_decisions_total", **decided)],
        samples[_key("flywheel_backend_latency_seconds_count", **fw, result="ok")],
    )
    assert [a - b for a, b in zip(after, before, strict=True)] == [1, 1, 1]
    assert samples[_key("flywheel_backend_healthy", **fw)] == 1
    assert samples[_key("flywheel_backend_cooldown", **lf)] == 1
    assert samples[_key("flywheel_backend_cooldown", **fw)] == 0
    assert ("flywheel_decision_writer_backlog", ()) in samples
    assert "sk-FW-SECRET" not in scraped.text


async def test_a_fallback_and_a_failed_attempt_are_counted(world: World, raw_api_key: str) -> None:
    world.fail(world.fw_route)
    fw = _shared(world.fw)
    before = (
        _value("flywheel_fallbacks_total", intent="code-review"),
        _value("flywheel_backend_latency_seconds_count", **fw, result="failed"),
    )

    asked = await _request(
        "POST",
        "/api/v1/query",
        json={"question": REVIEW},
        headers={"Authorization": f"Bearer {raw_api_key}"},
    )
    await sync_to_async(drain)()

    assert asked.json()["routing"]["fallback_used"] is True
    assert _value("flywheel_fallbacks_total", intent="code-review") == before[0] + 1
    assert _value("flywheel_backend_latency_seconds_count", **fw, result="failed") == before[1] + 1


async def test_a_rate_limit_refusal_is_counted(raw_api_key: str) -> None:
    before = _value("flywheel_rate_limited_total", limit="auth-failures")

    with override_settings(AUTH_FAILURE_LIMIT=(2, 60)):
        statuses = [
            (
                await _request("GET", "/api/v1/whoami", headers={"Authorization": "Bearer nope"})
            ).status_code
            for _ in range(4)
        ]

    assert statuses[-1] == 429
    assert _value("flywheel_rate_limited_total", limit="auth-failures") > before


async def test_metrics_are_refused_to_another_machine_without_the_token() -> None:
    refused = await _request("GET", "/metrics", client="10.1.2.3")
    with override_settings(METRICS_TOKEN="s3cret-token"):
        wrong = await _request(
            "GET", "/metrics", client="10.1.2.3", headers={"Authorization": "Bearer nope"}
        )
        right = await _request(
            "GET", "/metrics", client="10.1.2.3", headers={"Authorization": "Bearer s3cret-token"}
        )

    assert refused.status_code == wrong.status_code == 403
    assert refused.json()["error"]["type"] == "PermissionDenied"
    assert right.status_code == 200
    assert "flywheel_requests_total" in right.text


def _processes_env(tmp_path: Path) -> dict[str, str]:
    """The environment of processes that count into one PROMETHEUS_MULTIPROC_DIR (made
    here), with no database: the backends' gauges are skipped, the counts still answer."""
    (tmp_path / "metrics").mkdir()
    return {
        **os.environ,
        "PROMETHEUS_MULTIPROC_DIR": str(tmp_path / "metrics"),
        "DATABASE_URL": f"sqlite:///{tmp_path / 'none.sqlite3'}",
    }


def test_with_several_processes_a_scrape_sums_them(tmp_path: Path) -> None:
    """uvicorn --workers: each process counts in PROMETHEUS_MULTIPROC_DIR, and any of
    them answers /metrics with the sum."""
    env = _processes_env(tmp_path)
    count = (
        "import django; django.setup();"
        "from flywheel.metrics import DECISIONS;"
        "DECISIONS.labels('7', 'shared', 'fw', 'general', 'rules', 'success').inc(3)"
    )
    for _ in range(2):
        subprocess.run(  # noqa: S603 - our own interpreter
            [sys.executable, "-c", count], cwd=ROOT, env=env, check=True
        )
    scrape = (
        "import django; django.setup();"
        "from flywheel.metrics import exposition;"
        "print(exposition()[0].decode())"
    )
    printed = subprocess.run(  # noqa: S603 - our own interpreter
        [sys.executable, "-c", scrape],
        cwd=ROOT,
        env=env,
        check=True,
        capture_output=True,
        text=True,
    ).stdout

    decided = _key(
        "flywheel_decisions_total",
        backend_id="7",
        owner="shared",
        backend="fw",
        intent="general",
        method="rules",
        outcome="success",
    )
    assert _scraped(printed)[decided] == 6


async def test_a_tenant_backend_named_like_a_shared_one_never_shares_its_series(
    world: World, tenant: Tenant, raw_api_key: str
) -> None:
    """The attacker's own backend, named "fw" as the shared one, fails and cools down:
    its series are its own (backend_id, owner), and the shared fw's stay as they were."""

    def own_failing_fw() -> Backend:
        mine = Backend.objects.create(
            name="fw", kind="flowise", base_url="http://mine.test", tenant=tenant
        )
        BackendHealth.objects.create(backend=mine, healthy=True)
        Flow.objects.create(
            backend=mine,
            external_id="00000000-0000-4000-8000-0000000000aa",
            name="reviewer",
            deployed=True,
            intent_keywords=["code-review"],
        )
        refresh()
        return mine

    mine = await db(own_failing_fw)()
    world.router.post(url__regex=r"http://mine\.test/.*").mock(
        return_value=httpx.Response(500, json={"message": "boom"})
    )
    shared = {"backend_id": str(world.fw.pk), "owner": "shared", "backend": "fw"}
    owned = {"backend_id": str(mine.pk), "owner": str(tenant.pk), "backend": "fw"}
    shared_failed = _value("flywheel_backend_latency_seconds_count", **shared, result="failed")

    await _request(
        "POST",
        "/api/v1/query",
        json={"question": REVIEW, "backend": "fw"},
        headers={"Authorization": f"Bearer {raw_api_key}"},
    )
    await sync_to_async(drain)()
    await db(BackendHealth.objects.filter(backend=mine).update)(
        healthy=False, cooldown_until=timezone.now() + timedelta(minutes=1)
    )
    samples = _samples((await _request("GET", "/metrics")).text)

    seen = [_key(name, **labels) for name, labels, _ in samples]
    assert len(seen) == len(set(seen)), "two series share a name and labels"
    values = {key: value for key, (_, _, value) in zip(seen, samples, strict=True)}

    def read(name: str, **labels: str) -> float:
        return values[_key(name, **labels)]

    assert read("flywheel_backend_healthy", **shared) == 1
    assert read("flywheel_backend_cooldown", **shared) == 0
    assert read("flywheel_backend_healthy", **owned) == 0
    assert read("flywheel_backend_cooldown", **owned) == 1
    assert read("flywheel_backend_latency_seconds_count", **owned, result="failed") >= 1
    assert (
        _value("flywheel_backend_latency_seconds_count", **shared, result="failed") == shared_failed
    )


def test_a_killed_process_backlog_leaves_the_sum(tmp_path: Path) -> None:
    """A worker killed with decisions in its backlog: its last value must not count for
    ever (it showed 4,416 pending with none pending)."""
    env = _processes_env(tmp_path)
    killed = (
        "import os, signal, django; django.setup();"
        "from flywheel.metrics import WRITER_BACKLOG;"
        "WRITER_BACKLOG.inc(4416);"
        "os.kill(os.getpid(), signal.SIGKILL)"
    )
    done = subprocess.run([sys.executable, "-c", killed], cwd=ROOT, env=env, check=False)  # noqa: S603
    assert done.returncode == -signal.SIGKILL
    assert list((tmp_path / "metrics").glob("gauge_livesum_*.db"))  # what it left

    with mock.patch.dict(os.environ, {"PROMETHEUS_MULTIPROC_DIR": str(tmp_path / "metrics")}):
        printed = exposition()[0].decode()

    backlog = [v for (name, _), v in _scraped(printed).items() if "writer_backlog" in name]
    assert sum(backlog) == 0  # before, 4416
    assert not list((tmp_path / "metrics").glob("gauge_livesum_*.db"))

"""Health checks: history rows, current health, cooldown, the published snapshot,
and who may ask for a probe (or a discovery) on demand, how often."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import httpx
import pytest
import respx
from asgiref.sync import async_to_sync
from django.core.cache import caches
from django.test import Client
from django.urls import reverse
from django.utils import timezone
from rest_framework.test import APIClient

from backends import snapshot
from backends.adapters.base import HealthResult
from backends.models import Backend, BackendHealth, HealthCheck
from backends.on_demand import HEALTH_CHECK_SECONDS
from backends.services import HealthOutcome, ahealth_check_all, health_record
from backends.tasks import check_health
from flywheel.cache import shared_cache
from flywheel.models import Tenant
from routing.models import RoutingPolicy
from tests.captured import response

pytestmark = pytest.mark.django_db(transaction=True)

GOOD = HealthResult(ok=True, latency_ms=12.0)
BAD = HealthResult(ok=False, latency_ms=5.0, error="connection refused")


@pytest.fixture
def policy(db) -> RoutingPolicy:
    return RoutingPolicy.objects.create(cooldown_failures=3, cooldown_seconds=60)


def test_a_probe_writes_history_and_current_health(backend: Backend, policy) -> None:
    outcome = health_record(backend=backend, result=GOOD)

    assert outcome.ok
    assert not outcome.in_cooldown
    assert HealthCheck.objects.get().latency_ms == 12.0
    health = BackendHealth.objects.get(backend=backend)
    assert (health.healthy, health.consecutive_failures, health.latency_ms) == (True, 0, 12.0)


def test_repeated_failures_open_a_cooldown(backend: Backend, policy) -> None:
    for _ in range(2):
        assert not health_record(backend=backend, result=BAD).in_cooldown

    outcome = health_record(backend=backend, result=BAD)

    health = BackendHealth.objects.get(backend=backend)
    assert outcome.in_cooldown
    assert health.consecutive_failures == 3
    assert health.last_error == "connection refused"
    assert health.cooldown_until is not None
    assert health.cooldown_until > timezone.now() + timedelta(seconds=50)


def test_a_good_probe_during_cooldown_does_not_end_it(backend: Backend, policy) -> None:
    for _ in range(3):
        health_record(backend=backend, result=BAD)

    outcome = health_record(backend=backend, result=GOOD)

    assert outcome.ok
    assert outcome.in_cooldown
    assert BackendHealth.objects.get(backend=backend).cooldown_until is not None


def test_a_good_probe_after_the_cooldown_closes_it(backend: Backend, policy) -> None:
    for _ in range(3):
        health_record(backend=backend, result=BAD)
    BackendHealth.objects.filter(backend=backend).update(
        cooldown_until=timezone.now() - timedelta(seconds=1)
    )

    outcome = health_record(backend=backend, result=GOOD)

    health = BackendHealth.objects.get(backend=backend)
    assert not outcome.in_cooldown
    assert (health.healthy, health.cooldown_until, health.consecutive_failures) == (True, None, 0)


def test_the_published_health_is_dropped_when_health_is_saved(backend: Backend, policy) -> None:
    health_record(backend=backend, result=GOOD)
    assert snapshot.read_health()[backend.pk]["healthy"] is True

    BackendHealth.objects.filter(backend=backend).update(healthy=False)  # no signal
    assert snapshot.read_health()[backend.pk]["healthy"] is True
    BackendHealth.objects.get(backend=backend).save()  # a save drops the cached copy

    assert snapshot.read_health()[backend.pk]["healthy"] is False


@respx.mock
def test_checking_all_backends_isolates_a_failing_one(policy) -> None:
    up = Backend.objects.create(name="up", kind="flowise", base_url="http://up.test")
    down = Backend.objects.create(name="down", kind="langflow", base_url="http://down.test")
    respx.get("http://up.test/api/v1/ping").mock(return_value=response("flowise", "ping"))
    respx.get("http://down.test/health_check").mock(side_effect=httpx.ConnectError("refused"))

    outcomes = async_to_sync(ahealth_check_all)()

    by_name = {o.backend: o for o in outcomes if isinstance(o, HealthOutcome)}
    assert len(by_name) == 2
    assert by_name["up"].ok
    assert not by_name["down"].ok
    assert "could not be reached" in by_name["down"].error
    published = snapshot.read_health()
    assert published[up.pk]["healthy"] is True
    assert published[down.pk]["healthy"] is False


@respx.mock
def test_the_beat_task_probes_every_enabled_backend(policy) -> None:
    Backend.objects.create(name="up", kind="flowise", base_url="http://up.test")
    Backend.objects.create(name="off", kind="flowise", base_url="http://off.test", enabled=False)
    respx.get("http://up.test/api/v1/ping").mock(return_value=response("flowise", "ping"))

    assert check_health() == {"healthy": 1, "unhealthy": 0}
    assert HealthCheck.objects.count() == 1


@respx.mock
def test_backends_are_probed_concurrently_within_the_bound(policy) -> None:
    backends = [
        Backend.objects.create(name=f"b{i}", kind="flowise", base_url=f"http://b{i}.test")
        for i in range(6)
    ]
    in_flight = peak = 0

    async def slow_pong(request: httpx.Request) -> httpx.Response:
        nonlocal in_flight, peak
        in_flight += 1
        peak = max(peak, in_flight)
        await asyncio.sleep(0.05)
        in_flight -= 1
        return response("flowise", "ping")

    respx.get(url__regex=r"http://b\d\.test/api/v1/ping").mock(side_effect=slow_pong)

    outcomes = async_to_sync(ahealth_check_all)(backends, concurrency=2)

    assert [o.backend for o in outcomes if isinstance(o, HealthOutcome)] == [
        b.name for b in backends
    ]
    assert peak == 2


# --- on demand: owner or staff only, one per backend per interval (issue 11, section 3)


@pytest.fixture
def own(tenant: Tenant) -> Backend:
    return Backend.objects.create(
        name="own", kind="flowise", base_url="http://fw.test", api_key="k", tenant=tenant
    )


@respx.mock
def test_a_tenant_cannot_probe_or_discover_a_shared_backend(
    api_client: APIClient, backend: Backend
) -> None:
    ping = respx.get(f"{backend.base_url}/api/v1/ping")
    flows = respx.get(f"{backend.base_url}/api/v1/chatflows")

    probed = [api_client.post(f"/api/v1/backends/{backend.pk}/health-check") for _ in range(3)]
    discovered = api_client.post(f"/api/v1/backends/{backend.pk}/discover")

    for result in (*probed, discovered):
        assert result.status_code == 403
        assert result.json()["error"]["type"] == "PermissionDenied"
    assert not ping.called
    assert not flows.called
    assert not HealthCheck.objects.exists()
    assert not BackendHealth.objects.exists()


@respx.mock
def test_on_demand_probes_are_limited_per_backend_across_processes(
    api_client: APIClient, own: Backend
) -> None:
    ping = respx.get("http://fw.test/api/v1/ping").mock(return_value=response("flowise", "ping"))
    url = f"/api/v1/backends/{own.pk}/health-check"

    first = api_client.post(url)
    second = api_client.post(url)

    assert first.status_code == 200
    assert second.status_code == 429
    assert second.json()["error"]["type"] == "RateLimitError"
    assert 1 <= int(second["Retry-After"]) <= HEALTH_CHECK_SECONDS
    assert ping.call_count == 1
    assert HealthCheck.objects.count() == 1
    # The slot lives in the shared cache (Redis), so every web process sees it.
    another_process = caches.create_connection("default")
    assert another_process.get(f"flywheel:on-demand:health-check:{own.pk}") is not None
    shared_cache().delete(f"flywheel:on-demand:health-check:{own.pk}")
    assert api_client.post(url).status_code == 200


@respx.mock
def test_on_demand_discovery_is_limited_too(api_client: APIClient, own: Backend) -> None:
    respx.get("http://fw.test/api/v1/chatflows").mock(
        return_value=httpx.Response(200, json={"data": [], "total": 0})
    )
    url = f"/api/v1/backends/{own.pk}/discover"

    assert api_client.post(url).status_code == 200
    limited = api_client.post(url)

    assert limited.status_code == 429
    assert int(limited["Retry-After"]) >= 1


@respx.mock
def test_the_admin_action_is_limited_per_backend(admin_client: Client, backend: Backend) -> None:
    ping = respx.get(f"{backend.base_url}/api/v1/ping").mock(
        return_value=response("flowise", "ping")
    )
    action = {"action": "check_health_now", "_selected_action": [backend.pk]}
    changelist = reverse("admin:backends_backend_changelist")

    admin_client.post(changelist, action)
    again = admin_client.post(changelist, action, follow=True)

    shown = [str(m) for m in again.context["messages"]]
    assert any("try again in" in message for message in shown)
    assert ping.call_count == 1
    assert HealthCheck.objects.count() == 1

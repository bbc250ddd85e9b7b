"""Discovery and health services against both real servers, including a restart."""

from __future__ import annotations

import subprocess
from typing import TypeVar

import pytest

from backends import snapshot as health_snapshot
from backends.adapters import run_sync
from backends.adapters.base import BackendConfig
from backends.errors import BackendError
from backends.models import Backend, BackendHealth
from backends.services import HealthOutcome, ahealth_check_all
from chatflows import snapshot as flows_snapshot
from chatflows.models import Flow
from chatflows.services import DiscoveryReport, adiscover_all
from tests.live.conftest import ROOT, register_peers

T = TypeVar("T")

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def live_backends(flowise_config: BackendConfig, langflow_config: BackendConfig) -> list[Backend]:
    return register_peers(flowise_config, langflow_config)


def test_discovery_stores_the_flows_of_both_servers(live_backends, peers) -> None:
    reports = _outcomes(run_sync(adiscover_all), DiscoveryReport)

    assert all(r.total > 0 for r in reports), reports
    stored = set(Flow.objects.values_list("external_id", flat=True))
    for key in (
        "FLOWISE_AGENTFLOW_ID",
        "FLOWISE_CHATFLOW_ID",
        "LANGFLOW_ECHO_FLOW_ID",
        "LANGFLOW_PROMPT_FLOW_ID",
    ):
        assert peers[key] in stored
    published = flows_snapshot.read_flows()
    assert {f["external_id"] for f in published["flows"]} >= {peers["LANGFLOW_ECHO_FLOW_ID"]}

    again = _outcomes(run_sync(adiscover_all), DiscoveryReport)
    assert [(r.added, r.removed) for r in again] == [(0, 0), (0, 0)]


def _outcomes(results: list[T | BackendError], kind: type[T]) -> list[T]:
    """The results, asserting none of them is an error."""
    assert all(isinstance(r, kind) for r in results), results
    return [r for r in results if isinstance(r, kind)]


def _peers(action: str, name: str) -> None:
    subprocess.run([str(ROOT / "scripts" / "peers" / f"{action}.sh"), name], check=True)  # noqa: S603


def test_a_stopped_backend_turns_unhealthy_and_recovers_after_restart(live_backends) -> None:
    flowise = live_backends[0]
    assert all(o.ok for o in _outcomes(run_sync(ahealth_check_all), HealthOutcome))

    _peers("stop", "flowise")
    try:
        down = _outcomes(run_sync(ahealth_check_all), HealthOutcome)
        assert [o.ok for o in down] == [False, True]
        assert BackendHealth.objects.get(backend=flowise).healthy is False
        assert health_snapshot.read_health()[flowise.pk]["healthy"] is False
    finally:
        _peers("start", "flowise")

    up = _outcomes(run_sync(ahealth_check_all), HealthOutcome)
    assert [o.ok for o in up] == [True, True]
    assert BackendHealth.objects.get(backend=flowise).healthy is True

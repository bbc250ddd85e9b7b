"""Live tests: real Flowise and Langflow servers started by `make peers`.

They read var/peers.env (written by scripts/peers/seed.py). With
FLYWHEEL_LIVE=1 a missing or unreachable server fails the test; without it
the test is skipped with the reason, never silently.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from backends.adapters import build_adapter, run_sync
from backends.adapters.base import BackendConfig
from backends.adapters.flowise import FlowiseBackend
from backends.adapters.langflow import LangflowBackend
from backends.models import Backend
from backends.services import ahealth_check_all
from chatflows.models import Flow
from chatflows.services import adiscover_all
from routing.models import RoutingPolicy
from routing.selection import state
from tests.paths import ROOT

PEERS_ENV = Path(os.environ.get("FLYWHEEL_PEERS_ENV", ROOT / "var" / "peers.env"))
REQUIRED = os.environ.get("FLYWHEEL_LIVE") == "1"

pytestmark = pytest.mark.live


def _unavailable(reason: str) -> None:
    if REQUIRED:
        pytest.fail(f"FLYWHEEL_LIVE=1 but {reason}")
    pytest.skip(f"live peers unavailable: {reason} (run `make peers`)")


def _read_env() -> dict[str, str]:
    if not PEERS_ENV.exists():
        _unavailable(f"{PEERS_ENV} does not exist")
    values = {}
    for line in PEERS_ENV.read_text().splitlines():
        key, sep, value = line.partition("=")
        if sep and not key.startswith("#"):
            values[key.strip()] = value.strip().strip("'\"")
    return values


def register_peers(*configs: BackendConfig) -> list[Backend]:
    """The peers as backends, as staff register them (they listen on loopback)."""
    return [
        Backend.objects.create(
            name=config.name,
            kind=config.kind,
            base_url=config.base_url,
            api_key=config.api_key,
            allow_private_addresses=True,
        )
        for config in configs
    ]


def serve_code_review(peers: dict[str, str]) -> None:
    """Discover and probe the registered peers, and mark their echo flows as serving code
    review (the agentflow more specifically), so routing has a known choice to make."""
    run_sync(adiscover_all)
    serving = {
        peers["FLOWISE_AGENTFLOW_ID"]: ["code-review", "refactor", "pull request"],
        peers["LANGFLOW_PROMPT_FLOW_ID"]: ["code-review"],
    }
    for flow in Flow.objects.filter(external_id__in=serving):
        flow.intent_keywords = serving[flow.external_id]
        flow.keywords_edited = True
        flow.save()
    run_sync(ahealth_check_all)
    # Nothing is measured yet, so the seed's score orders them; routing does not explore
    # here, or the first question would go to either peer (one draw of equal priors).
    RoutingPolicy.objects.update(exploration=0.0)
    state.forget()


@pytest.fixture(scope="session")
def peers() -> dict[str, str]:
    return _read_env()


def _require(url: str, path: str) -> None:
    try:
        httpx.get(f"{url}{path}", timeout=5).raise_for_status()
    except httpx.HTTPError as err:
        _unavailable(f"{url} does not answer ({err})")


@pytest.fixture
def flowise_config(peers: dict[str, str]) -> BackendConfig:
    _require(peers["FLOWISE_URL"], "/api/v1/ping")
    return BackendConfig(
        id=1,
        name="flowise-live",
        kind="flowise",
        base_url=peers["FLOWISE_URL"],
        api_key=peers["FLOWISE_API_KEY"],
        timeout_seconds=30,
        allow_private_addresses=True,  # the peers listen on loopback, as staff register them
    )


@pytest.fixture
def langflow_config(peers: dict[str, str]) -> BackendConfig:
    _require(peers["LANGFLOW_URL"], "/health_check")
    return BackendConfig(
        id=2,
        name="langflow-live",
        kind="langflow",
        base_url=peers["LANGFLOW_URL"],
        api_key=peers["LANGFLOW_API_KEY"],
        timeout_seconds=30,
        allow_private_addresses=True,
    )


@pytest.fixture
async def flowise(flowise_config: BackendConfig) -> AsyncIterator[FlowiseBackend]:
    adapter = build_adapter(flowise_config)
    assert isinstance(adapter, FlowiseBackend)
    yield adapter
    await adapter.aclose()


@pytest.fixture
async def langflow(langflow_config: BackendConfig) -> AsyncIterator[LangflowBackend]:
    adapter = build_adapter(langflow_config)
    assert isinstance(adapter, LangflowBackend)
    yield adapter
    await adapter.aclose()

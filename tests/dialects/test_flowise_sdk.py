"""Flowise's own client, the ``flowise-sdk`` package from npm, under node, against
Flywheel's Flowise door on a real server: an application that used it against a
Flowise server changes only its base URL. The backend behind Flywheel is a
stand-in Flowise (bench/standin.py) that echoes the question."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from backends.models import BackendHealth
from backends.services import backend_create
from chatflows.models import Flow
from flywheel.models import Tenant
from flywheel.services import api_key_create
from routing.install import defaults_load
from routing.models import RoutingDecision
from routing.recording.writer import drain
from tests.paths import ROOT
from tests.routing_world import refresh
from tests.served import server_env, serving_web, standing_in

pytestmark = pytest.mark.django_db(transaction=True)

SDK = "flowise-sdk@1.0.9"
CLIENTS = ROOT / "var" / "npm-clients"  # installed once per checkout, from npm's registry
CLIENT = Path(__file__).parent / "clients" / "flowise_sdk.js"


@pytest.fixture(scope="module")
def flowise_sdk() -> Path:
    module = CLIENTS / "node_modules" / "flowise-sdk" / "dist" / "flowise-sdk.js"
    if not module.exists():
        subprocess.run(  # noqa: S603 - npm, with our own arguments
            ["npm", "install", "--no-audit", "--no-fund", "--prefix", str(CLIENTS), SDK],  # noqa: S607
            check=True,
            capture_output=True,
            timeout=300,
        )
    return module


@pytest.fixture
def standin() -> Iterator[int]:
    with standing_in() as port:
        yield port


def test_flowises_own_client_is_answered_whole_and_streamed(
    standin: int, tenant: Tenant, flowise_sdk: Path
) -> None:
    defaults_load()
    backend = backend_create(
        name="standin", kind="flowise", base_url=f"http://127.0.0.1:{standin}", trusted=True
    )
    BackendHealth.objects.create(backend=backend, healthy=True)
    Flow.objects.create(
        backend=backend,
        external_id="standin-flow",
        name="Echo",
        deployed=True,
        is_generic=True,
        intent_keywords=["general"],
    )
    refresh()
    key = api_key_create(tenant=tenant, name="flowise-sdk")[1]

    with serving_web(server_env()) as url:
        done = subprocess.run(  # noqa: S603 - node, with our own script
            [  # noqa: S607 - node from PATH, as npm installed the client for it
                "node",
                str(CLIENT),
                str(flowise_sdk),
                f"{url}/compat/flowise",
                key,
                "standin-flow",
                "hi sdk",
            ],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    drain()

    assert done.returncode == 0, done.stderr
    answered = json.loads(done.stdout)
    assert answered["whole"]["text"] == "Echo: hi sdk"
    assert answered["whole"]["flywheel"]["backend"] == "standin"
    events = answered["events"]
    assert "".join(e["data"] for e in events if e["event"] == "token") == "Echo: hi sdk"
    assert events[-1] == {"event": "end", "data": "[DONE]"}
    metadata = next(e["data"] for e in events if e["event"] == "metadata")
    request_ids = [answered["whole"]["chatMessageId"], metadata["chatMessageId"]]
    assert RoutingDecision.objects.filter(request_id__in=request_ids).count() == 2

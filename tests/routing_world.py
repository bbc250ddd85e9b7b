"""A small routing world for service tests: two backends, their flows, mocked HTTP.

Backend answers are the ones captured from the real servers (tests/fixtures).
Routing does not explore in this world (the policy's ``exploration`` is 0): with no
history both backends have the same estimate, and a draw from each (Thompson
sampling) would choose between them at random; off, the tie goes to the name, fw.
Tests of exploration turn it on (tests/routing/selection/test_planning.py).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta

import httpx
import pytest
import respx
from django.utils import timezone

from backends import snapshot as health_snapshot
from backends.models import Backend, BackendHealth
from chatflows import snapshot as flows_snapshot
from chatflows.models import Flow
from routing.install import defaults_load
from routing.selection import state
from tests.captured import body, response

FW_FLOW = body("flowise", "chatflow_get")["id"]
LF_FLOW = body("langflow", "flow_get")["id"]
FW_ANSWER = body("flowise", "prediction_agentflow")["text"]
LF_ANSWER = "hello langflow"


@dataclass
class World:
    fw: Backend
    lf: Backend
    fw_flow: Flow
    lf_flow: Flow
    generic: Flow
    fw_route: respx.Route
    lf_route: respx.Route
    router: respx.MockRouter  # for other HTTP a test mocks (an LLM)

    def sent_to_flowise(self, index: int = -1) -> dict:
        return json.loads(self.fw_route.calls[index].request.content)

    def sent_to_langflow(self, index: int = -1) -> dict:
        return json.loads(self.lf_route.calls[index].request.content)

    def fail(self, route: respx.Route, status: int = 500) -> None:
        route.mock(return_value=httpx.Response(status, json={"message": "boom"}))

    def tunable(self, flow: Flow, *triples: tuple[str, str, str]) -> None:
        """Say where temperature and max_tokens reach ``flow``, as discovery would have
        found them: (parameter, node, field) triples."""
        Flow.objects.filter(pk=flow.pk).update(tunable=[list(t) for t in triples])
        refresh()

    def set_health(self, backend: Backend, *, healthy: bool, cooldown: bool = False) -> None:
        BackendHealth.objects.filter(backend=backend).update(
            healthy=healthy,
            cooldown_until=timezone.now() + timedelta(minutes=5) if cooldown else None,
        )
        refresh()


def refresh() -> None:
    """Publish the database's state and drop this process's memo, as beat + time would."""
    flows_snapshot.publish_flows()
    health_snapshot.publish_health()
    state.forget()


@pytest.fixture
def world(db: None) -> Iterator[World]:
    """Two backends with flows and health, their HTTP mocked with captured answers."""
    with respx.mock(assert_all_called=False) as router:
        yield build_world(router)


def build_world(router: respx.MockRouter) -> World:
    defaults_load()
    policy = state.routing_policy_get()
    policy.exploration = 0.0
    policy.save()
    fw = Backend.objects.create(
        name="fw", kind="flowise", base_url="http://fw.test", api_key="sk-FW-SECRET"
    )
    lf = Backend.objects.create(
        name="lf", kind="langflow", base_url="http://lf.test", api_key="sk-LF-SECRET"
    )
    for backend in (fw, lf):
        BackendHealth.objects.create(backend=backend, healthy=True)
    fw_flow = Flow.objects.create(
        backend=fw,
        external_id=FW_FLOW,
        name="reviewer",
        deployed=True,
        intent_keywords=["code-review", "refactor", "pull request", "summarize"],
    )
    lf_flow = Flow.objects.create(
        backend=lf,
        external_id=LF_FLOW,
        name="echo",
        deployed=True,
        intent_keywords=["code-review", "summarize"],
    )
    generic = Flow.objects.create(
        backend=lf,
        external_id="00000000-0000-4000-8000-000000000001",
        name="anything",
        deployed=True,
        is_generic=True,
        intent_keywords=["general"],
    )
    fw_route = router.post(url__regex=r"http://fw\.test/api/v1/prediction/.*").mock(
        return_value=response("flowise", "prediction_agentflow")
    )
    lf_route = router.post(url__regex=r"http://lf\.test/api/v1/run/.*").mock(
        return_value=response("langflow", "run_echo")
    )
    refresh()
    return World(fw, lf, fw_flow, lf_flow, generic, fw_route, lf_route, router)

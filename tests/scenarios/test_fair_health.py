"""Fair health: one tenant cannot bench a shared backend for the others.

The attack of the "Limits" issue, end to end through the REST door: a tenant's own
backend answers at length; the tenant continues that conversation on a shared backend
whose proxy refuses the history that now travels with every question (413). Those
refusals are the caller's doing, so the shared backend stays in rotation for everyone,
and its performance keeps no record of them. (The issue's 12 MB answer is now cut at
FLYWHEEL_MAX_ANSWER_BYTES and the history kept within FLYWHEEL_HISTORY_BUDGET_CHARS,
so the proxy here is stricter than nginx's default 1 MiB, to be refused all the same.)
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from rest_framework.test import APIClient

from backends.models import Backend, BackendHealth
from chatflows.models import Flow
from flywheel.models import Tenant
from flywheel.services import api_key_create
from routing.models import PerformanceRecord, Session
from routing.recording.writer import drain
from routing.selection.breaker import MIN_ATTEMPTS, breaker_settle
from tests.captured import body, response
from tests.routing_world import FW_ANSWER, World, refresh

pytestmark = pytest.mark.django_db(transaction=True)

REVIEW = "Please review my pull request"
OWN_ANSWER_BYTES = 100_000
# A client_max_body_size in front of the shared Flowise below the history Flywheel sends
# on (FLYWHEEL_HISTORY_BUDGET_CHARS); nginx's refusal:
BODY_LIMIT = 16 * 1024
NGINX_413 = (
    "<html>\r\n<head><title>413 Request Entity Too Large</title></head>\r\n<body>\r\n"
    "<center><h1>413 Request Entity Too Large</h1></center>\r\n<hr><center>nginx</center>\r\n"
    "</body>\r\n</html>\r\n"
)


def behind_a_body_limit(request: httpx.Request) -> httpx.Response:
    if len(request.content) > BODY_LIMIT:
        return httpx.Response(413, text=NGINX_413, headers={"content-type": "text/html"})
    return response("flowise", "prediction_agentflow")


def own_backend(world: World, tenant: Tenant) -> None:
    """The tenant's own Flowise, answering at length."""
    mine = Backend.objects.create(
        name="mine", kind="flowise", base_url="http://mine.test", api_key="k", tenant=tenant
    )
    BackendHealth.objects.create(backend=mine, healthy=True)
    Flow.objects.create(
        backend=mine,
        external_id="mine-1",
        name="mine",
        deployed=True,
        intent_keywords=["code-review"],
    )
    huge = body("flowise", "prediction_agentflow") | {"text": "x" * OWN_ANSWER_BYTES}
    world.router.post(url__regex=r"http://mine\.test/api/v1/prediction/.*").mock(
        return_value=httpx.Response(200, json=huge)
    )
    refresh()


def client_of(tenant: Tenant) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {api_key_create(tenant=tenant, name='k')[1]}")
    return client


def query(client: APIClient, **fields: Any) -> Any:
    result = client.post("/api/v1/query", fields, format="json")
    breaker_settle()
    return result


def test_a_tenant_cannot_bench_a_shared_backend_with_a_history_it_refuses(
    world: World, tenant: Tenant
) -> None:
    own_backend(world, tenant)
    world.fw_route.mock(side_effect=behind_a_body_limit)
    attacker, bystander = client_of(tenant), client_of(Tenant.objects.create(name="B", slug="b"))
    session = str(Session.objects.create(tenant=tenant).pk)  # whose turns keep the answers
    first = query(attacker, question=REVIEW, backend="mine", session_id=session)
    assert first.status_code == 200

    refused = [
        query(
            attacker,
            question=f"{REVIEW}, part {n}",
            session_id=session,
            backend="fw",
            fallback=False,  # fw alone: a named backend would fall back to "mine"
        )
        for n in range(MIN_ATTEMPTS + 3)  # new questions: no cached answer stands in
    ]

    assert {r.status_code for r in refused} == {502}  # fw tried and refused each time
    assert world.fw_route.call_count == MIN_ATTEMPTS + 3
    chain = refused[-1].json()["error"]["details"]["fallback_chain"]
    assert "HTTP 413" in chain[0]["error"]
    answered = query(bystander, question=REVIEW, backend="fw")
    assert answered.status_code == 200, answered.json()  # not 503 BackendUnavailable
    assert answered.json()["answer"] == FW_ANSWER
    assert BackendHealth.objects.get(backend=world.fw).cooldown_until is None
    drain()
    fw_records = PerformanceRecord.objects.filter(backend=world.fw)
    assert not fw_records.filter(success=False).exists()  # the refusals said nothing of fw

"""Issue 11, sections 1, 2 and 5: what a backend's failure tells, and whose key goes where.

What a failed probe or attempt tells a tenant is Flywheel's own account,
never a reply's body and never a credential Flywheel sent; a tenant that
names its backend like a shared one never receives the shared one's key.
Where a backend may point is tested in test_backend_addresses.py, who may
probe on demand in test_health_service.py.
"""

from __future__ import annotations

import json
from io import StringIO
from typing import Any

import httpx
import pytest
import respx
from django.core.management import call_command
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.test import Client
from django.urls import reverse
from rest_framework.test import APIClient

from backends.http import redact
from backends.models import Backend, BackendHealth, HealthCheck
from backends.services import backend_update
from chatflows.models import Flow
from flywheel.errors import ValidationError
from flywheel.models import Tenant
from routing.install import defaults_load
from routing.models import RoutingDecision
from routing.recording.writer import drain
from tests.backends.test_addresses import (  # noqa: F401 - dns is an autouse fixture
    OPAQUE_KEY,
    _admin_form,
    _post,
    committed,
    dns,
)
from tests.captured import response
from tests.routing_world import World, refresh

pytestmark = pytest.mark.django_db


@pytest.fixture
def own(tenant: Tenant) -> Backend:
    return Backend.objects.create(
        name="own", kind="flowise", base_url="http://fw.test", api_key=OPAQUE_KEY, tenant=tenant
    )


# --- 1 and 5. what a failed probe or attempt tells ---------------------------------------


def _echo_json(request: httpx.Request) -> httpx.Response:
    """Echo the key we sent without its scheme: no generic "Bearer ..." pattern finds
    it, only the exact spellings of what was sent do."""
    sent = request.headers.get("authorization") or request.headers.get("x-api-key") or ""
    return httpx.Response(500, json={"message": f"refused {sent.removeprefix('Bearer ')}"})


def _echo_page(request: httpx.Request) -> httpx.Response:
    page = f"<pre>INTERNAL_ONLY_TOKEN=abc123\n{dict(request.headers)}</pre>"
    return httpx.Response(200, text=page, headers={"content-type": "text/html"})


@committed
@pytest.mark.parametrize("echo", [_echo_json, _echo_page])
@respx.mock
def test_a_probe_never_repeats_a_body_or_our_key(
    api_client: APIClient, own: Backend, echo: Any
) -> None:
    respx.get("http://fw.test/api/v1/ping").mock(side_effect=echo)

    probed = api_client.post(f"/api/v1/backends/{own.pk}/health-check")
    listed = api_client.get("/api/v1/backends")

    assert probed.status_code == 200
    assert probed.json()["ok"] is False
    stored = [HealthCheck.objects.get().error, BackendHealth.objects.get().last_error]
    for text in (probed.content.decode(), listed.content.decode(), *stored):
        assert OPAQUE_KEY not in text
        assert "INTERNAL_ONLY_TOKEN" not in text
    if echo is _echo_page:
        assert probed.json()["error"].startswith("unexpected ping answer (HTTP 200, text/html, ")


def _opaque_keys(world: World) -> None:
    for backend, key in ((world.fw, OPAQUE_KEY), (world.lf, OPAQUE_KEY[::-1])):
        backend.api_key = key
        backend.save()
    refresh()


def _no_key_in(*texts: str) -> None:
    for text in texts:
        assert OPAQUE_KEY not in text
        assert OPAQUE_KEY[::-1] not in text


@committed
def test_an_attempt_that_echoes_our_key_leaks_it_nowhere(
    world: World, api_client: APIClient
) -> None:
    _opaque_keys(world)
    world.fw_route.mock(side_effect=_echo_json)

    answered = api_client.post(
        "/api/v1/query", {"question": "Please review my pull request"}, format="json"
    )
    drain()

    assert answered.status_code == 200, answered.content
    (failed, won) = answered.json()["routing"]["fallback_chain"]
    assert (failed["backend"], failed["ok"], won["ok"]) == ("fw", False, True)
    assert "[redacted]" in failed["error"]
    decision = RoutingDecision.objects.get()
    _no_key_in(answered.content.decode(), json.dumps(decision.fallback_chain))


@committed
def test_when_every_attempt_echoes_the_error_leaks_no_key(
    world: World, api_client: APIClient
) -> None:
    _opaque_keys(world)
    world.fw_route.mock(side_effect=_echo_json)
    world.lf_route.mock(
        side_effect=lambda request: httpx.Response(
            500, json={"detail": f"bad key {request.headers['x-api-key']}"}
        )
    )

    failed = api_client.post(
        "/api/v1/query", {"question": "Please review my pull request"}, format="json"
    )
    drain()

    assert failed.status_code >= 500
    assert world.fw_route.called
    assert world.lf_route.called
    decisions = list(RoutingDecision.objects.values_list("fallback_chain", flat=True))
    _no_key_in(failed.content.decode(), json.dumps(decisions))


@committed
def test_a_key_that_cannot_be_sent_falls_back_to_the_next_backend(
    world: World, api_client: APIClient
) -> None:
    # A key stored before keys were checked: sending it would split the request.
    Backend.objects.filter(pk=world.fw.pk).update(api_key="sk-a\r\nX-Injected: 1")

    answered = api_client.post(
        "/api/v1/query", {"question": "Please review my pull request"}, format="json"
    )

    assert answered.status_code == 200, answered.content
    first, second = answered.json()["routing"]["fallback_chain"]
    assert (first["backend"], first["error_type"], second["ok"]) == (
        "fw",
        "ConfigurationError",
        True,
    )
    assert not world.fw_route.called


def test_credentials_are_scrubbed_from_backend_text() -> None:
    secrets = redact.secret_spellings(["Bearer Zq7opaqueKEY/value+1"])
    text = (
        "got Zq7opaqueKEY/value+1 and Zq7opaqueKEY%2Fvalue%2B1, Bearer abc123def456 "
        'api_key=abc "password": "hunter2" sk-proj-abcdef123 http://u:p@host/ \x1b[31m'
    )

    cleaned = redact.redact(text, secrets)

    for leaked in ("Zq7opaque", "abc123def456", "hunter2", "sk-proj", "u:p@", "\x1b"):
        assert leaked not in cleaned
    assert cleaned.startswith("got [redacted] and [redacted], Bearer [redacted]")
    assert redact.redact("Basic authentication failed") == "Basic authentication failed"
    assert len(redact.redact("x" * 1000)) == redact.MESSAGE_CHARS


# --- 2. key capture through a same-named backend ------------------------------------------


REAL_KEY = "REAL-peer-key-0123456789"


def _add(*args: str) -> str:
    out = StringIO()
    call_command("add_backend", *args, stdout=out)
    return out.getvalue().strip()


@committed
def test_a_tenant_cannot_capture_the_key_make_peers_registers(
    api_client: APIClient, tenant: Tenant
) -> None:
    # The attack: a tenant takes the name first, pointing at its own server...
    squatted = _post(api_client, name="flowise-peer", base_url="http://attacker.test")
    assert squatted.status_code == 201, squatted.content
    # ...then `make peers` (scripts/peers/register.sh) registers the real server.
    args = ("--name", "flowise-peer", "--kind", "flowise", "--url", "http://127.0.0.1:3100")
    printed = _add(*args, "--api-key", REAL_KEY, "--update")
    again = _add(*args, "--api-key", REAL_KEY, "--update")

    shared = Backend.objects.get(tenant__isnull=True)
    assert printed.split(":")[0] == again.split(":")[0] == str(shared.pk)
    assert (shared.name, shared.api_key, shared.allow_private_addresses) == (
        "flowise-peer",
        REAL_KEY,
        True,
    )
    squat = Backend.objects.get(tenant=tenant)
    assert (squat.base_url, squat.api_key) == ("http://attacker.test", "")
    _the_tenant_never_reads(api_client, squat, shared)


def _the_tenant_never_reads(api_client: APIClient, squat: Backend, shared: Backend) -> None:
    defaults_load()
    for backend in (squat, shared):
        Flow.objects.create(
            backend=backend,
            external_id="f1",
            name="any",
            deployed=True,
            is_generic=True,
            intent_keywords=["general"],
        )
        BackendHealth.objects.create(backend=backend, healthy=True)
    refresh()
    with respx.mock(assert_all_called=False) as router:
        theirs = router.post(url__startswith="http://attacker.test/").mock(
            return_value=response("flowise", "prediction_agentflow")
        )
        real = router.post(url__startswith="http://127.0.0.1:3100/")
        asked = api_client.post(
            "/api/v1/query", {"question": "hi", "backend": "flowise-peer"}, format="json"
        )
        repointed = api_client.patch(
            f"/api/v1/backends/{shared.pk}", {"base_url": "http://attacker.test"}, format="json"
        )
        seen = [
            api_client.get("/api/v1/backends").content.decode(),
            api_client.get(f"/api/v1/backends/{shared.pk}").content.decode(),
        ]

    assert asked.status_code == 200, asked.content
    assert asked.json()["routing"]["backend"] == "flowise-peer"
    assert theirs.call_count == 1
    assert not real.called
    assert "authorization" not in theirs.calls[0].request.headers
    assert repointed.status_code == 403
    for text in seen:
        assert REAL_KEY not in text
        assert "3100" not in text  # nor where the shared one lives


def test_no_operation_moves_a_backend_to_another_owner(
    admin_client: Client, tenant: Tenant, backend: Backend
) -> None:
    other = Tenant.objects.create(name="Other", slug="other")
    with pytest.raises(ValidationError, match="owner"):
        backend_update(backend=backend, tenant=other, trusted=True)

    changed = admin_client.post(
        reverse("admin:backends_backend_change", args=[backend.pk]),
        _admin_form(name=backend.name, base_url=backend.base_url, tenant=other.pk),
    )

    assert changed.status_code == 302
    backend.refresh_from_db()
    assert (backend.tenant, backend.api_key) == (None, "sk-flowise-SECRET-do-not-render")


@committed
def test_the_migration_trusts_existing_shared_backends_only() -> None:
    executor = MigrationExecutor(connection)
    # Back to every app's last migration afterwards: going back unapplies the other apps'
    # migrations that depend on backends too (routing's and analytics' among them).
    before, after = [("backends", "0001_initial")], executor.loader.graph.leaf_nodes()
    executor.migrate(before)
    old = executor.loader.project_state(before).apps
    tenant = old.get_model("flywheel", "Tenant").objects.create(name="T", slug="t")
    old_backend = old.get_model("backends", "Backend")
    old_backend.objects.create(name="peer", kind="flowise", base_url="http://127.0.0.1:3100")
    old_backend.objects.create(
        name="own", kind="flowise", base_url="http://10.0.0.1", tenant_id=tenant.pk
    )

    executor = MigrationExecutor(connection)
    executor.migrate(after)

    trusted = dict(Backend.objects.values_list("name", "allow_private_addresses"))
    assert trusted == {"peer": True, "own": False}

"""add_backend and check_health commands."""

from __future__ import annotations

import contextlib
from io import StringIO

import httpx
import pytest
import respx
from django.core.management import CommandError, call_command

from backends.models import Backend
from flywheel.models import Tenant
from tests.captured import response

pytestmark = pytest.mark.django_db(transaction=True)


def _add(*args: str) -> str:
    """What add_backend prints; its first line starts with the backend's id."""
    out = StringIO()
    call_command("add_backend", *args, stdout=out)
    return out.getvalue().strip()


def _id(printed: str) -> str:
    return printed.split(":", 1)[0]


def test_add_backend_prints_the_new_id_first() -> None:
    printed = _add("--name", "fw", "--kind", "flowise", "--url", "http://fw.test", "--api-key", "k")

    backend = Backend.objects.get()
    assert (
        printed.splitlines()[0]
        == f"{backend.pk}: Registered backend 'fw' (flowise at http://fw.test)."
    )
    assert (backend.kind, backend.api_key) == ("flowise", "k")


def test_add_backend_refuses_a_taken_name_unless_updating() -> None:
    first = _add("--name", "fw", "--kind", "flowise", "--url", "http://fw.test")

    with pytest.raises(CommandError, match="--update"):
        _add("--name", "FW", "--kind", "flowise", "--url", "http://other.test")
    again = _add("--name", "fw", "--kind", "flowise", "--url", "http://new.test", "--update")

    assert _id(again) == _id(first)
    assert Backend.objects.get().base_url == "http://new.test"


def test_add_backend_reports_bad_input_and_creates_nothing() -> None:
    with pytest.raises(CommandError, match="base_url"):
        _add("--name", "fw", "--kind", "flowise", "--url", "not a url")
    assert not Backend.objects.exists()


@respx.mock
def test_check_health_prints_a_table() -> None:
    Backend.objects.create(name="fw", kind="flowise", base_url="http://fw.test")
    Backend.objects.create(name="lf", kind="langflow", base_url="http://lf.test")
    respx.get("http://fw.test/api/v1/ping").mock(return_value=response("flowise", "ping"))
    respx.get("http://lf.test/health_check").mock(side_effect=httpx.ConnectError("refused"))
    out, err = StringIO(), StringIO()

    call_command("check_health", stdout=out, stderr=err)

    lines = out.getvalue().splitlines()
    assert lines[0].split()[:3] == ["backend", "status", "latency"]
    assert lines[1].split()[:2] == ["fw", "ok"]
    assert lines[2].split()[:2] == ["lf", "down"]
    assert "1 backend(s) unhealthy" in err.getvalue()


@pytest.mark.parametrize("key", ["a\r\nb", "sk-abc\n", "sk\x00abc"])
def test_add_backend_refuses_a_key_with_a_line_break(key: str) -> None:
    with pytest.raises(CommandError, match="api_key"):
        _add("--name", "fw", "--kind", "flowise", "--url", "http://fw.test", "--api-key", key)
    assert not Backend.objects.exists()


def test_add_backend_registers_trusted_shared_backends() -> None:
    _add("--name", "peer", "--kind", "flowise", "--url", "http://127.0.0.1:3100")

    backend = Backend.objects.get()
    assert (backend.tenant, backend.allow_private_addresses) == (None, True)


def test_add_backend_with_a_tenant_touches_only_that_tenants_backend(tenant: Tenant) -> None:
    shared_id = _id(_add("--name", "lab", "--kind", "flowise", "--url", "http://10.0.0.1"))
    own_id = _id(
        _add("--name", "lab", "--kind", "flowise", "--url", "http://10.0.0.2", "--tenant", "acme")
    )
    _add(
        *("--name", "LAB", "--kind", "flowise", "--url", "http://10.0.0.3", "--update"),
        *("--tenant", "acme", "--api-key", "Zq7opaqueKEYvalue"),
    )

    assert shared_id != own_id
    shared, own = Backend.objects.get(pk=shared_id), Backend.objects.get(pk=own_id)
    assert (shared.tenant, shared.base_url, shared.api_key) == (None, "http://10.0.0.1", "")
    assert (own.tenant, own.base_url, own.api_key) == (
        tenant,
        "http://10.0.0.3",
        "Zq7opaqueKEYvalue",
    )
    with pytest.raises(CommandError, match="No tenant"):
        _add("--name", "lab", "--kind", "flowise", "--url", "http://x.test", "--tenant", "nope")


def _run_against_down_backends(command: str, *args: str) -> None:
    """Run a command whose backends are all down: discovery then fails as a whole."""
    with contextlib.suppress(CommandError):
        call_command(command, *args, stdout=StringIO(), stderr=StringIO())


@respx.mock
@pytest.mark.parametrize("command", ["check_health", "discover_flows"])
def test_a_named_backend_is_the_shared_one_unless_a_tenant_is_named(
    tenant: Tenant, command: str
) -> None:
    """A tenant's backend of the same name is another backend: not probed, not reported."""
    Backend.objects.create(name="peer", kind="flowise", base_url="http://shared.test")
    Backend.objects.create(name="peer", kind="flowise", base_url="http://squat.test", tenant=tenant)
    shared = respx.route(host="shared.test").mock(side_effect=httpx.ConnectError("refused"))
    squat = respx.route(host="squat.test").mock(side_effect=httpx.ConnectError("refused"))

    _run_against_down_backends(command, "--backend", "peer")
    assert shared.called
    assert not squat.called

    shared.reset()
    _run_against_down_backends(command, "--backend", "peer", "--tenant", tenant.slug)
    assert squat.called
    assert not shared.called

    with pytest.raises(CommandError, match="No shared backend named 'nobody'"):
        call_command(command, "--backend", "nobody", stdout=StringIO())

"""add_backend and check_health commands."""

from __future__ import annotations

from io import StringIO

import httpx
import pytest
import respx
from django.core.management import CommandError, call_command

from backends.models import Backend
from tests.captured import response

pytestmark = pytest.mark.django_db(transaction=True)


def _add(*args: str) -> str:
    out = StringIO()
    call_command("add_backend", *args, stdout=out)
    return out.getvalue().strip()


def test_add_backend_prints_the_new_id() -> None:
    printed = _add("--name", "fw", "--kind", "flowise", "--url", "http://fw.test", "--api-key", "k")

    backend = Backend.objects.get()
    assert printed == str(backend.pk)
    assert (backend.kind, backend.api_key) == ("flowise", "k")


def test_add_backend_refuses_a_taken_name_unless_updating() -> None:
    first = _add("--name", "fw", "--kind", "flowise", "--url", "http://fw.test")

    with pytest.raises(CommandError, match="--update"):
        _add("--name", "FW", "--kind", "flowise", "--url", "http://other.test")
    again = _add("--name", "fw", "--kind", "flowise", "--url", "http://new.test", "--update")

    assert again == first
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

"""Issue 11, section 1: where a backend a tenant registers may point (SSRF).

A tenant's backend may reach only public addresses (or the allowlist),
checked when its URL is saved, on every address the host resolves to, and
again when connecting, on the addresses actually resolved (real sockets
below), so DNS rebinding gains nothing. Staff-registered backends are trusted.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from io import StringIO
from ipaddress import ip_address
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from django.test import Client, override_settings
from django.urls import reverse
from rest_framework.test import APIClient

from backends import addresses
from backends.http import NetworkTransport
from backends.http import client as http
from backends.models import Backend, HealthCheck
from flywheel.models import Tenant

pytestmark = pytest.mark.django_db
# For tests whose work crosses threads (probes through run_sync, decisions written
# behind the answer): their rows must be committed to be seen.
committed = pytest.mark.django_db(transaction=True)

# Stand-ins for public addresses (documentation ranges are not global, so real
# public ones are used; nothing connects to them: HTTP is mocked or refused).
PUBLIC = "93.184.216.34"
DNS = {
    "fw.test": [PUBLIC],
    "attacker.test": ["93.184.216.35"],
    "internal.test": ["10.0.0.5"],
    "mixed.test": [PUBLIC, "192.168.1.10"],
}
OPAQUE_KEY = "Zq7opaqueKEYvalue"  # shaped like no known credential: only exact redaction finds it


@pytest.fixture(autouse=True)
def dns(monkeypatch: pytest.MonkeyPatch) -> dict[str, list[str]]:
    """DNS leaves the process: test names resolve from a table; numeric hosts and
    localhost resolve for real (no network); other names do not resolve."""
    table = dict(DNS)
    real = addresses.resolve

    def resolve(host: str, port: int) -> list[str]:
        if host in table:
            return table[host]
        if host == "localhost":
            return real(host, port)
        infos = socket.getaddrinfo(host, port, flags=socket.AI_NUMERICHOST)
        return [str(info[4][0]) for info in infos]

    monkeypatch.setattr(addresses, "resolve", resolve)
    return table


def _post(client: APIClient, **fields: Any) -> Any:
    body = {"name": "mine", "kind": "flowise", "base_url": "http://fw.test", **fields}
    return client.post("/api/v1/backends", body, format="json")


def _fields(result: Any) -> dict[str, Any]:
    assert result.status_code == 400, result.content
    error = result.json()["error"]
    assert error["type"] == "ValidationError"
    return error["details"]["fields"]


# --- 1. where a backend may point ----------------------------------------------------


@pytest.mark.parametrize(
    "url",
    [
        "ftp://fw.test/",
        "file:///etc/passwd",
        "gopher://fw.test:70/",
        "http://user:pw@fw.test",
        "http://user@fw.test",
        "https://:pw@fw.test",
    ],
)
def test_a_backend_url_must_be_http_or_https_without_user_info(
    api_client: APIClient, admin_client: Client, url: str
) -> None:
    assert "base_url" in _fields(_post(api_client, base_url=url))
    with pytest.raises(CommandError, match="base_url"):
        call_command("add_backend", "--name", "x", "--kind", "flowise", "--url", url)
    page = admin_client.post(reverse("admin:backends_backend_add"), _admin_form(base_url=url))
    assert "base_url" in page.context["adminform"].form.errors
    assert not Backend.objects.exists()


INTERNAL = [
    "http://127.0.0.1:3000",
    "http://127.1",
    "http://2130706433",
    "http://0x7f.0.0.1",
    "http://0177.0.0.1",
    "http://localhost:3000",
    "http://[::1]:3000",
    "http://[::ffff:127.0.0.1]",
    "http://[::]",
    "http://0.0.0.0",
    "http://[fe80::1]",
    "http://169.254.169.254/latest/meta-data",
    "http://10.0.0.1",
    "http://172.16.0.1",
    "http://192.168.1.1",
    "http://100.64.0.1",
    "http://224.0.0.1",
    "http://240.0.0.1",
    "http://[fc00::1]",
    "http://[fec0::1]",
    "http://[ff02::1]",
    "http://[2002:7f00:1::]",  # 6to4 around 127.0.0.1
    "http://[2002:a00:1::]",  # 6to4 around 10.0.0.1
    "http://[64:ff9b::a00:1]",  # NAT64 around 10.0.0.1
    "http://internal.test",
    "http://mixed.test",  # one address public, one not: every one must pass
    "http://nowhere.test",  # does not resolve: refused in the same words
]


@pytest.mark.parametrize("url", INTERNAL)
def test_a_tenant_cannot_register_an_internal_address(api_client: APIClient, url: str) -> None:
    fields = _fields(_post(api_client, base_url=url))

    assert list(fields) == ["base_url"]  # some spellings are not even valid URLs: refused too
    assert not Backend.objects.exists()


@pytest.mark.parametrize("url", INTERNAL)
def test_the_address_policy_refuses_every_spelling(url: str) -> None:
    assert addresses.url_problem(url) == addresses.NOT_ALLOWED


@pytest.mark.parametrize("address", [PUBLIC, "8.8.8.8", "2606:4700:4700::1111", "2002:808:808::"])
def test_public_addresses_are_allowed(address: str) -> None:
    assert addresses.address_allowed(ip_address(address))


def test_the_allowlist_opens_its_networks_and_nothing_more(api_client: APIClient) -> None:
    with override_settings(BACKEND_ALLOWED_NETWORKS=["10.0.0.0/8"]):
        allowed = _post(api_client, base_url="http://internal.test:8080")
        still_refused = _post(api_client, name="other", base_url="http://192.168.1.1")

    assert allowed.status_code == 201, allowed.content
    assert "base_url" in _fields(still_refused)
    assert list(Backend.objects.values_list("base_url", flat=True)) == ["http://internal.test:8080"]


def test_a_tenant_that_repoints_its_backend_is_checked_and_loses_key_and_trust(
    api_client: APIClient, tenant: Tenant
) -> None:
    # Registered for the tenant by staff, trusted, with a key the tenant never saw.
    backend = Backend.objects.create(
        name="lab",
        kind="flowise",
        base_url="http://10.0.0.9",
        api_key=OPAQUE_KEY,
        tenant=tenant,
        allow_private_addresses=True,
    )
    url = f"/api/v1/backends/{backend.pk}"

    kept = api_client.patch(url, {"base_url": "http://10.0.0.9", "weight": 2}, format="json")
    refused = api_client.patch(url, {"base_url": "http://192.168.0.7"}, format="json")
    backend.refresh_from_db()
    assert (backend.base_url, backend.api_key, backend.allow_private_addresses) == (
        "http://10.0.0.9",
        OPAQUE_KEY,
        True,
    )
    moved = api_client.patch(url, {"base_url": "http://attacker.test"}, format="json")

    assert kept.status_code == 200
    assert "base_url" in _fields(refused)
    assert moved.status_code == 200
    assert moved.json()["has_api_key"] is False
    backend.refresh_from_db()
    assert (backend.api_key, backend.allow_private_addresses) == ("", False)


def _admin_form(**fields: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "name": "lab",
        "kind": "flowise",
        "base_url": "http://10.0.0.1",
        "api_key": "",
        "enabled": "on",
        "timeout_seconds": 60,
        "weight": 1,
        "allow_private_addresses": "on",
        "tenant": "",
        "health-TOTAL_FORMS": "0",
        "health-INITIAL_FORMS": "0",
        "health-MIN_NUM_FORMS": "0",
        "health-MAX_NUM_FORMS": "1",
    }
    data.update(fields)
    return {k: v for k, v in data.items() if v is not None}


def test_staff_may_register_private_addresses_in_the_admin_unless_they_clear_the_box(
    admin_client: Client,
) -> None:
    add = reverse("admin:backends_backend_add")

    refused = admin_client.post(add, _admin_form(allow_private_addresses=None))
    saved = admin_client.post(add, _admin_form())

    assert "base_url" in refused.context["adminform"].form.errors
    assert saved.status_code == 302
    assert Backend.objects.get().allow_private_addresses is True


# --- 1. checked again when connecting, on real sockets -----------------------------------


@pytest.fixture
def local_server() -> Iterator[tuple[int, list[str]]]:
    """A Flowise stand-in on 127.0.0.1 answering pong: its port and the paths it was asked."""
    seen: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            seen.append(self.path)
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", "4")
            self.end_headers()
            self.wfile.write(b"pong")

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1], seen
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def real_network(monkeypatch: pytest.MonkeyPatch) -> None:
    """The product's aiohttp transport, not the suite's httpx mocks."""
    monkeypatch.setattr(
        http,
        "network_transport",
        lambda *, restricted=False: NetworkTransport(restricted=restricted),
    )


@committed
def test_dns_rebinding_after_saving_is_refused_at_connect_time(
    api_client: APIClient,
    dns: dict[str, list[str]],
    local_server: tuple[int, list[str]],
    real_network: None,
) -> None:
    port, seen = local_server
    dns["localhost"] = [PUBLIC]  # what the name said when the URL was saved
    created = _post(api_client, base_url=f"http://localhost:{port}")
    assert created.status_code == 201, created.content
    del dns["localhost"]  # ...and now it says 127.0.0.1, for real
    staff = Backend.objects.create(
        name="staff",
        kind="flowise",
        base_url=f"http://localhost:{port}",
        allow_private_addresses=True,
    )

    probed = api_client.post(f"/api/v1/backends/{created.json()['id']}/health-check")
    call_command("check_health", "--backend", "staff", stdout=StringIO(), stderr=StringIO())

    assert probed.status_code == 200, probed.content
    assert probed.json()["ok"] is False
    assert "did not resolve to an address it may use" in probed.json()["error"]
    assert seen == ["/api/v1/ping"]  # the trusted backend's probe only
    assert HealthCheck.objects.get(backend=staff).ok is True

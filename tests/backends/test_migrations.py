"""The data migrations that scrub error text stored before replies were described."""

from __future__ import annotations

import importlib

import pytest
from django.db import connection
from django.db.migrations.loader import MigrationLoader

from backends.models import Backend, BackendHealth, HealthCheck
from flywheel.models import Tenant
from routing.models import RoutingDecision

pytestmark = pytest.mark.django_db

KEY = "Zq7opaqueKEYvalue"


def _run(migration: str) -> None:
    """Run the migration's scrub on the models as they were at its point in history
    (the database has every later column too, which those models leave alone)."""
    app_label, _, name = migration.partition(".migrations.")
    state = MigrationLoader(connection).project_state((app_label, name))
    importlib.import_module(migration).scrub(state.apps, None)


def test_stored_health_errors_lose_the_reply_and_the_key(tenant: Tenant) -> None:
    backend = Backend.objects.create(
        name="fw", kind="flowise", base_url="http://fw.test", api_key=KEY, tenant=tenant
    )
    BackendHealth.objects.create(
        backend=backend, last_error="unexpected ping answer: INTERNAL_ONLY_TOKEN=abc123"
    )
    HealthCheck.objects.create(backend=backend, ok=False, error=f"Flowise: refused Bearer {KEY}")
    HealthCheck.objects.create(backend=backend, ok=False, error=f"echo: {KEY}")
    HealthCheck.objects.create(backend=backend, ok=True, error="")

    _run("backends.migrations.0003_scrub_stored_errors")

    health = BackendHealth.objects.get()
    assert health.last_error == "unexpected ping answer (the reply is not kept)"
    errors = list(HealthCheck.objects.values_list("error", flat=True))
    assert all(KEY not in error for error in errors)
    assert "" in errors  # an empty error stays empty


def test_stored_fallback_chains_lose_the_key(tenant: Tenant) -> None:
    Backend.objects.create(name="fw", kind="flowise", base_url="http://fw.test", api_key=KEY)
    chain = [
        {"backend": "fw", "ok": False, "error": f"Flowise backend 'fw': refused {KEY}"},
        {"backend": "lf", "ok": True, "error": ""},
    ]
    decision = RoutingDecision.objects.create(
        tenant=tenant, question="q", outcome="fallback", fallback_chain=chain
    )

    _run("analytics.migrations.0003_scrub_fallback_chains")

    decision.refresh_from_db()
    assert KEY not in str(decision.fallback_chain)
    assert decision.fallback_chain[0]["error"].startswith("Flowise backend 'fw': refused ")
    assert decision.fallback_chain[1] == chain[1]

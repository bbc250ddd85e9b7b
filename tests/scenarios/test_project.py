"""Project-level behaviour: probes, the error shape, migrations, the API schema."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from io import StringIO

import pytest
from django.core.management import call_command
from django.db import connection
from django.test import Client, override_settings
from rest_framework.test import APIClient

from flywheel.celery import app as celery_app

pytestmark = pytest.mark.django_db

CLOSED_PORT_REDIS = "redis://127.0.0.1:1/0"  # nothing listens on port 1


def test_healthz_answers(client: Client) -> None:
    response = client.get("/healthz")

    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


def test_readyz_is_ready_when_database_cache_and_broker_answer(client: Client) -> None:
    response = client.get("/readyz")

    assert response.status_code == 200, response.content
    assert response.json()["checks"] == {"database": "ok", "cache": "ok", "broker": "ok"}


def test_the_suite_runs_against_redis() -> None:
    from django.conf import settings

    assert settings.CACHES["default"]["BACKEND"].endswith("RedisCache")
    assert celery_app.conf.broker_url.startswith("redis://")


def test_readyz_names_a_cache_that_is_down(client: Client) -> None:
    cache = {
        "BACKEND": "django.core.cache.backends.redis.RedisCache",
        "LOCATION": CLOSED_PORT_REDIS,
    }
    with override_settings(CACHES={"default": cache}):
        response = client.get("/readyz")

    assert response.status_code == 503
    error = response.json()["error"]
    assert error["type"] == "UnavailableError"
    assert error["details"]["down"] == ["cache"]
    assert error["details"]["checks"]["database"] == "ok"


def test_readyz_names_a_broker_that_is_down() -> None:
    # Celery reads its broker from the environment once, so the probe runs in a
    # process of its own, configured with a broker that refuses connections.
    probe = (
        "import django, json; django.setup(); "
        "from flywheel.readiness import readiness_report; print(json.dumps(readiness_report()))"
    )
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "flywheel.settings"}
    env["CELERY_BROKER_URL"] = CLOSED_PORT_REDIS
    db = connection.settings_dict
    env["DATABASE_URL"] = f"postgres://{db['USER']}@{db['HOST']}:{db['PORT']}/{db['NAME']}"
    result = subprocess.run(  # noqa: S603
        [sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=60
    )

    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["broker"].startswith("down: ")
    assert (report["database"], report["cache"]) == ("ok", "ok")


def test_unknown_api_paths_answer_in_the_error_shape(api_client: APIClient) -> None:
    response = api_client.get("/api/v1/no-such-thing")

    assert response.status_code == 404
    assert response.json()["error"]["type"] == "NotFoundError"


def test_wrong_methods_answer_in_the_error_shape(api_client: APIClient) -> None:
    response = api_client.post("/api/v1/whoami", {}, format="json")

    assert response.status_code == 405
    assert response.json()["error"]["type"] == "MethodNotAllowed"


def test_malformed_json_answers_in_the_error_shape(api_client: APIClient) -> None:
    response = api_client.generic(
        "PUT", "/api/v1/whoami", "{not json", content_type="application/json"
    )

    assert response.status_code in {400, 405}
    assert set(response.json()["error"]) == {"type", "message", "details"}


def test_the_openapi_schema_and_docs_are_served(client: Client) -> None:
    schema = client.get("/api/v1/schema", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    docs = client.get("/api/v1/docs")

    assert schema.status_code == 200
    assert "/api/v1/whoami" in schema.content.decode()
    assert docs.status_code == 200


def test_migrations_match_the_models() -> None:
    call_command("makemigrations", "--check", "--dry-run", stdout=StringIO())


def test_the_bootstrap_command_creates_an_admin_and_a_key_only_once() -> None:
    first, second = StringIO(), StringIO()

    call_command("bootstrap", stdout=first)
    call_command("bootstrap", stdout=second)

    assert "password" in first.getvalue()
    assert "API key (shown once): fw_" in first.getvalue()
    assert "password" not in second.getvalue()
    assert "API key" not in second.getvalue()


def test_the_openapi_schema_is_valid_and_documents_the_query_path(tmp_path) -> None:
    target = tmp_path / "schema.yaml"

    call_command("spectacular", "--validate", "--fail-on-warn", "--file", str(target))

    schema = target.read_text()
    for path in ("/api/v1/query:", "/api/v1/route:", "/api/v1/query-router/status:"):
        assert path in schema
    assert "ApiKey" in schema


@override_settings(READINESS_TIMEOUT_SECONDS=0.3)
def test_readyz_answers_in_time_when_a_dependency_hangs(
    client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    from flywheel import readiness

    monkeypatch.setitem(readiness.CHECKS, "database", lambda: time.sleep(3))  # a pool waiting
    started = time.perf_counter()

    response = client.get("/readyz")

    assert time.perf_counter() - started < 1.5
    assert response.status_code == 503
    checks = response.json()["error"]["details"]["checks"]
    assert checks == {"database": "down: no answer within 0.3 s", "cache": "ok", "broker": "ok"}

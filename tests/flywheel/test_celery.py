"""Celery carries tasks through the real Redis broker to a worker."""

from __future__ import annotations

import time

import pytest
import respx
from celery.contrib.testing.worker import start_worker

from backends.models import Backend, HealthCheck
from backends.tasks import check_health
from flywheel.celery import app
from tests.captured import response

pytestmark = pytest.mark.django_db(transaction=True)


@respx.mock
def test_a_task_sent_through_redis_runs_on_a_worker() -> None:
    backend = Backend.objects.create(name="fw", kind="flowise", base_url="http://fw.test")
    respx.get("http://fw.test/api/v1/ping").mock(return_value=response("flowise", "ping"))
    app.control.purge()

    with start_worker(app, pool="solo", perform_ping_check=False, shutdown_timeout=10):
        check_health.delay()
        deadline = time.monotonic() + 15
        while not HealthCheck.objects.filter(backend=backend).exists():
            assert time.monotonic() < deadline, "the worker did not run the task in 15 s"
            time.sleep(0.1)

    check = HealthCheck.objects.get(backend=backend)
    assert check.ok is True, check.error
    assert app.conf.broker_url.startswith("redis://")

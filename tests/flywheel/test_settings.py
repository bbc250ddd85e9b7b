"""Settings come from the environment and fail loudly on a bad value."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from django.core.exceptions import ImproperlyConfigured

from flywheel.env import as_bool, as_database, as_positive_int, read
from tests.paths import ROOT


def _start_django(**env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", "import django; django.setup()"],
        cwd=ROOT,
        env={**os.environ, "DJANGO_SETTINGS_MODULE": "flywheel.settings", **env},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("DJANGO_DEBUG", "maybe"),
        ("DATABASE_URL", "mysql://root@127.0.0.1/flywheel"),
        ("DATABASE_URL", "not a url"),
        ("CACHE_URL", "bogus://127.0.0.1"),
        ("CELERY_BROKER_URL", "127.0.0.1:6379"),
        ("CELERY_TASK_TIME_LIMIT", "-5"),
        ("CELERY_TASK_SOFT_TIME_LIMIT", "soon"),
        ("FLYWHEEL_LOG_LEVEL", "LOUD"),
        ("FLYWHEEL_READINESS_TIMEOUT", "0"),
        ("FLYWHEEL_DISCOVERY_MAX_PAGES", "0"),
        ("FLYWHEEL_RECORD_FIELD_MAX_BYTES", "64k"),
    ],
)
def test_start_up_stops_naming_the_bad_variable(variable: str, value: str) -> None:
    result = _start_django(**{variable: value})

    assert result.returncode != 0
    last_line = result.stderr.strip().splitlines()[-1]
    assert "ImproperlyConfigured" in last_line
    assert variable in last_line


def test_start_up_succeeds_with_the_test_environment() -> None:
    result = _start_django()

    assert result.returncode == 0, result.stderr


def test_read_returns_the_default_when_unset(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("FLYWHEEL_TEST_VALUE", raising=False)

    assert read("FLYWHEEL_TEST_VALUE", as_positive_int, 7) == 7


def test_read_parses_a_set_value(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FLYWHEEL_TEST_VALUE", "yes")

    assert read("FLYWHEEL_TEST_VALUE", as_bool, False) is True


def test_read_names_the_variable_in_its_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FLYWHEEL_TEST_VALUE", "0")

    with pytest.raises(ImproperlyConfigured, match="FLYWHEEL_TEST_VALUE"):
        read("FLYWHEEL_TEST_VALUE", as_positive_int, 1)


def test_database_urls_accept_postgres_and_sqlite() -> None:
    assert as_database("postgres://u@h:5432/db")["ENGINE"] == "django.db.backends.postgresql"
    assert as_database("sqlite:////tmp/x.sqlite3")["ENGINE"] == "django.db.backends.sqlite3"

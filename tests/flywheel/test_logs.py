"""Log lines name the query they belong to; one line per decision; JSON on request."""

from __future__ import annotations

import contextvars
import json
import logging
import os
import subprocess
import sys
from collections.abc import Iterator

import pytest
from asgiref.sync import async_to_sync

from flywheel.logs import JsonFormatter, RequestIdFilter
from flywheel.models import Tenant
from routing.answering.query_input import query_request
from routing.answering.service import answer_question
from routing.recording.writer import drain
from tests.paths import ROOT
from tests.routing_world import World

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def lines() -> Iterator[list[logging.LogRecord]]:
    """What a handler configured as settings.LOGGING's receives (its request-id filter)."""
    records: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    handler = Keep(level=logging.INFO)
    handler.addFilter(RequestIdFilter())
    root = logging.getLogger()
    level = root.level
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    yield records
    root.removeHandler(handler)
    root.setLevel(level)


def test_every_line_of_a_query_names_its_request_id(
    world: World, tenant: Tenant, lines: list[logging.LogRecord]
) -> None:
    world.fail(world.fw_route)  # a failed attempt is logged, then the fallback answers

    body = async_to_sync(answer_question)(
        query_request({"question": "Please review my pull request"}), tenant=tenant
    )
    drain()

    mine = [r for r in lines if getattr(r, "request_id", None) == body["request_id"]]
    failed = [r for r in mine if r.levelno >= logging.WARNING]
    (decision,) = [r for r in mine if r.name == "flywheel.decisions"]
    assert failed, [r.getMessage() for r in lines]
    assert decision.fields["outcome"] == "fallback"  # type: ignore[attr-defined]
    assert decision.fields["backend"] == "lf"  # type: ignore[attr-defined]
    assert "review my pull request" not in decision.getMessage()  # the user's words stay out
    as_json = json.loads(JsonFormatter().format(decision))
    assert as_json["request_id"] == body["request_id"]
    assert (as_json["logger"], as_json["intent"], as_json["attempts"]) == (
        "flywheel.decisions",
        "code-review",
        2,
    )
    outside = logging.LogRecord("x", logging.INFO, __file__, 1, "outside", None, None)
    contextvars.Context().run(RequestIdFilter().filter, outside)  # e.g. a beat task's line
    assert outside.request_id == "-"  # type: ignore[attr-defined]


def test_json_lines_are_an_option_and_text_the_default() -> None:
    log = (
        "import django; django.setup(); import logging; logging.getLogger('x').warning('hi %s', 1)"
    )
    outputs = {}
    for fmt in ("json", ""):
        env = {**os.environ, "FLYWHEEL_LOG_FORMAT": fmt} if fmt else dict(os.environ)
        env.pop("FLYWHEEL_LOG_FORMAT", None) if not fmt else None
        outputs[fmt] = subprocess.run(  # noqa: S603 - our own interpreter
            [sys.executable, "-c", log],
            cwd=ROOT,
            env=env,
            check=True,
            capture_output=True,
            text=True,
        ).stderr.strip()

    line = json.loads(outputs["json"])
    assert (line["level"], line["logger"], line["message"], line["request_id"]) == (
        "WARNING",
        "x",
        "hi 1",
        "-",
    )
    assert outputs[""].endswith(" WARNING x [-] hi 1")

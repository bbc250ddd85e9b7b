"""Ask a question through the universal query and print the answer and how it was routed."""

from __future__ import annotations

import json
import logging
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from backends.adapters import run_sync
from flywheel.errors import ApplicationError
from flywheel.links import public_url
from flywheel.services import tenant_get_or_create_default
from routing.answering.query_input import query_request
from routing.answering.service import answer_question
from routing.recording.writer import drain

MAKE_RUN_URL = "http://127.0.0.1:8000"  # make run's default, until it has served once


def summary(body: dict[str, Any]) -> str:
    """One line under the answer: intent (method, confidence), who answered, the time
    and where the decision's trace is."""
    routing = body["routing"]
    who = f"{routing['backend']} / {routing['flow']}" if routing["backend"] else "answered here"
    if routing["fallback_used"]:
        who += f" after {len(routing['fallback_chain']) - 1} failed"
    total = routing["timings"].get("total_ms")
    took = f"{total:.0f} ms" if total is not None else "-"
    return (
        f"{routing['intent']} ({routing['method']} {routing['intent_confidence']:.2f}) · "
        f"{who} · {took} · {public_url() or MAKE_RUN_URL}{body['trace_url']}"
    )


class Command(BaseCommand):
    help = (
        "Answer a question (for the default tenant): the answer, then one line with the "
        "intent, the backend and flow, the time and the trace, and the session to continue. "
        "--json prints the whole answer as POST /api/v1/query gives it."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("question")
        parser.add_argument(
            "--backend", default="auto", help="auto, or a backend name, kind or id."
        )
        parser.add_argument(
            "--no-fallback",
            action="store_true",
            help="With --backend: if it fails, no other backend answers.",
        )
        parser.add_argument("--session", help="Continue this session (its id).")
        parser.add_argument("--intent", help="Skip classification: use this intent.")
        parser.add_argument("--json", action="store_true", help="Print the whole answer, as JSON.")

    def handle(self, *args: Any, **options: Any) -> None:
        # The summary line says what the decision's log line would: one is enough here.
        decisions_log = logging.getLogger("flywheel.decisions")
        level = decisions_log.level
        decisions_log.setLevel(logging.WARNING)
        try:
            self.ask(options)
        finally:
            decisions_log.setLevel(level)

    def ask(self, options: dict[str, Any]) -> None:
        data: dict[str, Any] = {"question": options["question"], "backend": options["backend"]}
        if options["no_fallback"]:
            data["fallback"] = False
        if options["session"]:
            data["session_id"] = options["session"]
        if options["intent"]:
            data["intent"] = options["intent"]
        try:
            body = run_sync(
                answer_question, query_request(data), tenant=tenant_get_or_create_default()
            )
        except ApplicationError as err:
            if options["json"]:
                raise CommandError(json.dumps(err.as_dict())) from err
            raise CommandError(f"{err.as_dict()['error']['type']}: {err.message}") from err
        finally:
            drain()  # the decision is written behind the answer: finish before exiting
        if options["json"]:
            self.stdout.write(json.dumps(body, indent=2))
            return
        self.stdout.write(body["answer"])
        self.stdout.write("")
        self.stdout.write(summary(body))
        said = body["routing"]["evidence"]["summary"]
        if said:
            self.stdout.write(f"Why {body['routing']['intent']}: {said}")
        for warning in body.get("warnings") or ():
            self.stdout.write(f"Warning: {warning}")
        self.stdout.write(
            f"Session {body['session_id']}: to continue it, ask ... --session {body['session_id']}"
        )

"""Ask a question through the universal query and print the answer and routing."""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from backends.adapters import run_sync
from flywheel.errors import ApplicationError
from flywheel.services import tenant_get_or_create_default
from routing.recording import drain
from routing.requests import query_request
from routing.service import answer_question


class Command(BaseCommand):
    help = "Answer a question (for the default tenant) and print the routing block."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("question")
        parser.add_argument("--backend", default="auto", help="auto, or a backend name or kind.")
        parser.add_argument("--session", help="Continue this session (its id).")
        parser.add_argument("--intent", help="Skip classification: use this intent.")

    def handle(self, *args: Any, **options: Any) -> None:
        data = {"question": options["question"], "backend": options["backend"]}
        if options["session"]:
            data["session_id"] = options["session"]
        if options["intent"]:
            data["intent"] = options["intent"]
        try:
            body = run_sync(
                answer_question, query_request(data), tenant=tenant_get_or_create_default()
            )
        except ApplicationError as err:
            raise CommandError(json.dumps(err.as_dict())) from err
        finally:
            drain()  # the decision is written behind the answer: finish before exiting
        self.stdout.write(body["answer"])
        self.stdout.write("")
        self.stdout.write(json.dumps(body["routing"], indent=2))
        self.stdout.write(f"session {body['session_id']}  request {body['request_id']}")

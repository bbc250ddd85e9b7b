"""Dry run: classify and score questions without running any flow."""

from __future__ import annotations

import json
import sys
from typing import Any

from asgiref.sync import async_to_sync
from django.core.management.base import BaseCommand, CommandParser

from flywheel.errors import ApplicationError
from flywheel.services import tenant_get_or_create_default
from routing.answering.query_input import query_request
from routing.answering.service import route_question


class Command(BaseCommand):
    help = (
        "Classify and score questions (a dry run: nothing is executed or recorded). "
        "With no questions, reads one per line from stdin."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("questions", nargs="*", metavar="QUESTION")
        parser.add_argument(
            "--json",
            action="store_true",
            help="One JSON object per line: what POST /api/v1/route answers.",
        )
        parser.add_argument(
            "--backend", default="auto", help="auto, or a backend name, kind or id."
        )
        parser.add_argument(
            "--no-fallback",
            action="store_true",
            help="With --backend: if it fails, no other backend answers.",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        tenant = tenant_get_or_create_default()
        questions = options["questions"] or (line.strip() for line in sys.stdin)
        for question in questions:
            if not question:
                continue
            try:
                asked = {"question": question, "backend": options["backend"]}
                if options["no_fallback"]:
                    asked["fallback"] = False
                request = query_request(asked)
                plan = async_to_sync(route_question)(request, tenant=tenant)
            except ApplicationError as err:
                self.stderr.write(f"{question[:60]!r}: {err.message}")
                continue
            if options["json"]:
                self.stdout.write(json.dumps(plan))
            else:
                self._print(plan)

    def _print(self, plan: dict[str, Any]) -> None:
        query_type = ""
        if plan["query_type"]:
            query_type = f", {plan['query_type']} {plan['query_type_confidence']:.2f}"
        self.stdout.write(
            f"{plan['question'][:70]!r}\n  intent {plan['intent']} "
            f"({plan['confidence']:.2f}, {plan['method']}{query_type})"
        )
        if plan["evidence"]["summary"]:
            self.stdout.write(f"  because: {plan['evidence']['summary']}")
        for candidate in plan["candidates"]:
            self.stdout.write(
                f"  {candidate['score']:.3f}  {candidate['backend']} / {candidate['flow']}  "
                f"(match {candidate['match']:.2f}, health {candidate['health']:.0f}, "
                f"performance {candidate['performance']:.2f})"
            )
        if plan.get("why"):
            self.stdout.write(f"  {plan['why']}")
        if plan["error"]:
            self.stdout.write(f"  {plan['error']['type']}: {plan['error']['message']}")

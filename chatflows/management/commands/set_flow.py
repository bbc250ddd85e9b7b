"""Say how routing uses a flow: generic (it serves any intent), the intents it serves,
and its scope (the query type it is made for: global, local or any).

The same as ticking "generic", editing the keywords or choosing the scope of a flow
in the admin (chatflows.services.flow_routing_set), for a terminal.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from backends.management.owner import add_owner_arguments, owner
from backends.models import Backend
from chatflows.models import Flow, FlowScope
from chatflows.services import flow_routing_set


class Command(BaseCommand):
    help = (
        "Make a flow generic (it answers any question), or set the intents it serves or "
        "its scope: "
        "set_flow FLOW --backend NAME --generic | --intents code-review,summarize "
        "| --scope global"
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("flow", help="The flow's name (or its id on the backend).")
        parser.add_argument("--backend", required=True, help="The backend's name.")
        generic = parser.add_mutually_exclusive_group()
        generic.add_argument("--generic", action="store_true", default=None)
        generic.add_argument("--not-generic", dest="generic", action="store_false")
        parser.add_argument(
            "--intents", help="The intents it serves, comma-separated (replaces the keywords)."
        )
        parser.add_argument(
            "--scope",
            choices=FlowScope.values,
            help="The query type it is made for: global (themes, overviews), local (specific "
            "facts) or any. Kept by later discoveries.",
        )
        add_owner_arguments(parser)

    def handle(self, *args: Any, **options: Any) -> None:
        if options["generic"] is None and options["intents"] is None and options["scope"] is None:
            raise CommandError("Say what to set: --generic, --not-generic, --intents or --scope.")
        flow = self._flow(options)
        flow = flow_routing_set(
            flow=flow,
            is_generic=options["generic"],
            intent_keywords=options["intents"].split(",") if options["intents"] else None,
            scope=options["scope"],
        )
        serves = "any intent (generic)" if flow.is_generic else "only its intents"
        self.stdout.write(
            f"{flow.backend.name} / {flow.name}: serves {serves}; "
            f"intents: {', '.join(flow.intent_keywords) or '(none)'}; scope: {flow.scope}."
        )

    @staticmethod
    def _flow(options: dict[str, Any]) -> Flow:
        """The flow named on the backend named (of the tenant named, else shared)."""
        flows = Flow.objects.filter(
            backend__name=options["backend"],
            backend__tenant=owner(options.get("tenant")),
            removed_at__isnull=True,
        ).select_related("backend")
        found = list(flows.filter(name=options["flow"])) or list(
            flows.filter(external_id=options["flow"])
        )
        if len(found) == 1:
            return found[0]
        names = ", ".join(sorted(flows.values_list("name", flat=True))) or "none"
        if not found and not flows.exists():
            raise CommandError(_no_backend(options["backend"], options.get("tenant")))
        if not found:
            raise CommandError(
                f"No flow {options['flow']!r} on backend {options['backend']!r} "
                f"(its flows: {names})."
            )
        raise CommandError(f"Several flows are named {options['flow']!r}: give its id instead.")


def _no_backend(name: str, tenant: str | None) -> str:
    """The backend named has no flow for this owner: say whose backends bear the name."""
    whose = f"tenant {tenant!r}" if tenant else "shared"
    owners = sorted(
        Backend.objects.filter(name=name, tenant__isnull=False)
        .exclude(tenant__slug=tenant or "")
        .values_list("tenant__slug", flat=True)
    )
    shared = tenant is not None and Backend.objects.filter(name=name, tenant=None).exists()
    hints = [f"--tenant {slug}" for slug in owners] + (["no --tenant (shared)"] if shared else [])
    found = Backend.objects.filter(name=name, tenant=owner(tenant)).exists()
    said = (
        f"The {whose} backend {name!r} has no flows yet."
        if found
        else (f"No {whose} backend is named {name!r}.")
    )
    return said + (f" One of that name is there with {' or '.join(hints)}." if hints else "")

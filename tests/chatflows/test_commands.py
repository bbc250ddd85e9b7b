"""``manage.py set_flow``: how routing uses a flow, from a terminal, as the admin's form."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from backends.adapters.records import DiscoveredFlow
from chatflows.models import Flow
from chatflows.services import flows_sync
from routing.errors import NoMatchingFlowError
from tests.routing.answering.test_service import ask
from tests.routing_world import World, refresh

pytestmark = pytest.mark.django_db(transaction=True)
QUESTION = "Write a haiku about the sea"  # creative-orientation: no flow serves it


def test_a_flow_made_generic_answers_what_no_flow_served(world: World, tenant) -> None:
    Flow.objects.filter(is_generic=True).update(is_generic=False)
    refresh()
    with pytest.raises(NoMatchingFlowError) as refused:
        ask(tenant, question=QUESTION)
    assert "set_flow FLOW --backend NAME --generic" in refused.value.message

    out = StringIO()
    call_command("set_flow", world.lf_flow.name, "--backend", "lf", "--generic", stdout=out)
    refresh()

    intents = ", ".join(world.lf_flow.intent_keywords) or "(none)"
    assert out.getvalue().strip() == (
        f"lf / {world.lf_flow.name}: serves any intent (generic); intents: {intents}; "
        f"scope: {world.lf_flow.scope}."
    )
    assert ask(tenant, question=QUESTION)["routing"]["backend"] == "lf"


def test_intents_set_from_the_terminal_are_kept_by_discovery(world: World) -> None:
    call_command(
        "set_flow", world.fw_flow.name, "--backend", "fw", "--intents", " Summarize, code-review,"
    )

    flow = Flow.objects.get(pk=world.fw_flow.pk)
    assert flow.intent_keywords == ["summarize", "code-review"]
    assert flow.keywords_edited


def test_an_unknown_flow_names_the_flows_there_are(world: World) -> None:
    with pytest.raises(CommandError) as refused:
        call_command("set_flow", "nope", "--backend", "fw", "--generic")

    assert (
        str(refused.value) == f"No flow 'nope' on backend 'fw' (its flows: {world.fw_flow.name})."
    )


def test_a_tenants_backend_named_without_its_tenant_says_which_to_add(world: World, tenant) -> None:
    """The first hour: add_backend --tenant default, then set_flow without --tenant said
    "No flow 'echo' on backend 'mine' (its flows: none)", as if it had none."""
    from backends.models import Backend

    mine = Backend.objects.create(name="mine", kind="flowise", base_url="http://m", tenant=tenant)
    Flow.objects.create(backend=mine, external_id="e1", name="echo")

    with pytest.raises(CommandError) as refused:
        call_command("set_flow", "echo", "--backend", "mine", "--generic")
    with pytest.raises(CommandError) as unknown:
        call_command("set_flow", "echo", "--backend", "nope", "--generic")
    call_command("set_flow", "echo", "--backend", "mine", "--tenant", tenant.slug, "--generic")

    assert str(refused.value) == (
        f"No shared backend is named 'mine'. One of that name is there with --tenant {tenant.slug}."
    )
    assert str(unknown.value) == "No shared backend is named 'nope'."
    assert Flow.objects.get(backend=mine).is_generic


def test_a_scope_set_alone_from_the_terminal_is_kept_by_discovery(world: World) -> None:
    before = Flow.objects.get(pk=world.fw_flow.pk)
    out = StringIO()

    call_command("set_flow", world.fw_flow.name, "--backend", "fw", "--scope", "global", stdout=out)
    flows_sync(
        backend=world.fw,
        discovered=[DiscoveredFlow(external_id=before.external_id, name="Docs Q&A lookup")],
    )

    flow = Flow.objects.get(pk=world.fw_flow.pk)
    assert (flow.scope, flow.scope_edited, flow.name) == ("global", True, "Docs Q&A lookup")
    assert (flow.is_generic, flow.keywords_edited) == (before.is_generic, before.keywords_edited)
    assert out.getvalue().strip().endswith("; scope: global.")


def test_an_unknown_scope_is_refused(world: World) -> None:
    with pytest.raises(CommandError, match="invalid choice: 'wide'"):
        call_command("set_flow", world.fw_flow.name, "--backend", "fw", "--scope", "wide")

    assert not Flow.objects.get(pk=world.fw_flow.pk).scope_edited


def test_it_needs_something_to_set(world: World) -> None:
    with pytest.raises(CommandError, match="--generic, --not-generic, --intents or --scope"):
        call_command("set_flow", world.fw_flow.name, "--backend", "fw")

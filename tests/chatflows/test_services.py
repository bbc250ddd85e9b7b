"""Discovery: upsert flows, mark vanished ones removed, derive intent keywords."""

from __future__ import annotations

import importlib
from io import StringIO

import pytest
import respx
from django.apps import apps
from django.core.management import call_command
from django_celery_beat.models import IntervalSchedule, PeriodicTask, PeriodicTasks

from backends.adapters.records import DiscoveredFlow
from backends.models import Backend
from chatflows import snapshot
from chatflows.lifecycle import chatflows_list
from chatflows.models import Flow
from chatflows.services import flow_routing_set, flows_sync
from chatflows.tasks import discover_flows
from flywheel.errors import ValidationError
from routing.install import defaults_load
from routing.models import Intent, IntentPattern
from tests.captured import body, response

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _defaults(db) -> None:
    defaults_load()


def _flow(external_id: str, name: str, **fields: object) -> DiscoveredFlow:
    return DiscoveredFlow(external_id=external_id, name=name, **fields)  # type: ignore[arg-type]


def test_new_flows_are_added_with_keywords_from_their_names(backend: Backend) -> None:
    report = flows_sync(
        backend=backend,
        discovered=[
            _flow("1", "Code review bot", description="refactor and pull request help"),
            _flow("2", "echo", endpoint_name="technical_analysis"),
        ],
    )

    assert (report.added, report.updated, report.removed) == (2, 0, 0)
    reviewer = Flow.objects.get(external_id="1")
    assert reviewer.intent_keywords[0] == "code-review"
    assert {"refactor", "pull request", "code review"} <= set(reviewer.intent_keywords)
    assert "technical-analysis" in Flow.objects.get(external_id="2").intent_keywords


def test_a_second_discovery_updates_only_what_changed(backend: Backend) -> None:
    flows_sync(backend=backend, discovered=[_flow("1", "a"), _flow("2", "b")])

    report = flows_sync(backend=backend, discovered=[_flow("1", "a"), _flow("2", "b renamed")])

    assert (report.added, report.updated, report.unchanged, report.removed) == (0, 1, 1, 0)
    assert Flow.objects.get(external_id="2").name == "b renamed"


def test_vanished_flows_are_marked_removed_not_deleted(backend: Backend) -> None:
    flows_sync(backend=backend, discovered=[_flow("1", "a"), _flow("2", "b")])

    report = flows_sync(backend=backend, discovered=[_flow("1", "a")])

    assert report.removed == 1
    gone = Flow.objects.get(external_id="2")
    assert gone.removed_at is not None
    assert list(Flow.objects.active().values_list("external_id", flat=True)) == ["1"]


def test_a_flow_that_comes_back_is_active_again(backend: Backend) -> None:
    flows_sync(backend=backend, discovered=[_flow("1", "a")])
    flows_sync(backend=backend, discovered=[])

    report = flows_sync(backend=backend, discovered=[_flow("1", "a")])

    assert report.updated == 1
    assert Flow.objects.get(external_id="1").removed_at is None


def test_keywords_edited_by_hand_are_never_overwritten(backend: Backend) -> None:
    flows_sync(backend=backend, discovered=[_flow("1", "Code review bot")])
    Flow.objects.filter(external_id="1").update(
        intent_keywords=["document-qa"], keywords_edited=True
    )

    flows_sync(backend=backend, discovered=[_flow("1", "Code review bot v2")])

    flow = Flow.objects.get(external_id="1")
    assert flow.name == "Code review bot v2"
    assert flow.intent_keywords == ["document-qa"]


def test_a_flows_scope_is_derived_from_its_name_description_and_nodes(backend: Backend) -> None:
    flows_sync(
        backend=backend,
        discovered=[
            _flow("1", "Weekly digest", description="themes and trends across the tickets"),
            _flow("2", "Docs Q&A", description="answers specific facts from the handbook"),
            _flow("3", "helper", node_kinds=("chatinput", "chroma", "parsercomponent")),
            _flow("4", "echo", node_kinds=("chatinput", "chatoutput")),
            _flow("5", "Summaries", node_kinds=("conversationalretrievalqachain",)),  # 2 to 1
        ],
    )

    scopes = dict(Flow.objects.values_list("external_id", "scope"))
    assert scopes == {"1": "global", "2": "local", "3": "local", "4": "any", "5": "global"}


def test_a_scope_set_by_hand_is_kept_by_discovery(backend: Backend) -> None:
    flows_sync(backend=backend, discovered=[_flow("1", "Weekly digest")])
    flow_routing_set(flow=Flow.objects.get(), scope="local")

    flows_sync(backend=backend, discovered=[_flow("1", "Weekly digest of themes")])

    flow = Flow.objects.get()
    assert (flow.scope, flow.scope_edited, flow.name) == ("local", True, "Weekly digest of themes")
    with pytest.raises(ValidationError, match="Unknown scope 'wide'"):
        flow_routing_set(flow=flow, scope="wide")
    assert Flow.objects.get().scope == "local"


def test_where_sampling_parameters_reach_a_flow_is_kept_and_published(backend: Backend) -> None:
    tunable = (("temperature", "OpenAIModel-1", "temperature"),)
    flows_sync(backend=backend, discovered=[_flow("1", "chat", tunable=tunable)])

    assert Flow.objects.get().tunable == [["temperature", "OpenAIModel-1", "temperature"]]
    assert snapshot.read_flows()["flows"][0]["tunable"] == [
        ["temperature", "OpenAIModel-1", "temperature"]
    ]
    report = flows_sync(backend=backend, discovered=[_flow("1", "chat", tunable=())])
    assert report.updated == 1
    assert Flow.objects.get().tunable == []


def test_keywords_follow_pattern_edits(backend: Backend) -> None:
    intent = Intent.objects.create(slug="poetry", name="Poetry")
    flows_sync(backend=backend, discovered=[_flow("1", "Haiku corner")])
    assert "poetry" not in Flow.objects.get().intent_keywords

    IntentPattern.objects.create(intent=intent, kind="keyword", pattern="haiku")
    flows_sync(backend=backend, discovered=[_flow("1", "Haiku corner")])

    assert "poetry" in Flow.objects.get().intent_keywords


def test_flows_on_other_backends_are_untouched(backend: Backend) -> None:
    other = Backend.objects.create(name="lf", kind="langflow", base_url="http://lf.test")
    flows_sync(backend=other, discovered=[_flow("1", "mine")])

    flows_sync(backend=backend, discovered=[])

    assert Flow.objects.get(backend=other).removed_at is None


def _mock_flowise_pages(base_url: str) -> None:
    pages = {
        "1": response("flowise", "chatflows_page1"),
        "2": response("flowise", "chatflows_page2"),
    }
    respx.get(f"{base_url}/api/v1/chatflows").mock(
        side_effect=lambda request: pages[request.url.params["page"]]
    )


@respx.mock
def test_the_beat_task_discovers_and_publishes_for_routing(backend: Backend) -> None:
    _mock_flowise_pages(backend.base_url)

    totals = discover_flows()

    assert totals == {"added": 2, "updated": 0, "removed": 0, "failed": 0}
    published = snapshot.read_flows()
    assert sorted(f["name"] for f in published["flows"]) == ["echo-agentflow", "echo-chatflow"]
    assert published["backends"][backend.pk]["name"] == backend.name


@respx.mock
def test_the_command_prints_progress_and_counts(backend: Backend) -> None:
    _mock_flowise_pages(backend.base_url)
    out = StringIO()

    call_command("discover_flows", "--backend", backend.name, stdout=out)

    assert f"{backend.name}: discovering" in out.getvalue()
    assert "2 flow(s): 2 added, 0 updated, 0 removed" in out.getvalue()


def test_snapshot_is_dropped_when_an_admin_edits_a_flow(backend: Backend) -> None:
    flows_sync(backend=backend, discovered=[_flow("1", "a", deployed=True)])
    snapshot.publish_flows()

    Flow.objects.filter(external_id="1").update(deployed=False)  # no signal: still cached
    assert len(snapshot.read_flows()["flows"]) == 1
    flow = Flow.objects.get(external_id="1")
    flow.save()  # a save (admin, API) drops the cached copy

    assert snapshot.read_flows()["flows"] == []


def test_snapshot_is_dropped_when_an_admin_disables_a_backend(backend: Backend) -> None:
    flows_sync(backend=backend, discovered=[_flow("1", "a", deployed=True)])
    assert backend.pk in snapshot.read_flows()["backends"]

    backend.enabled = False
    backend.save()  # chatflows listens to Backend too: its fields are in the snapshot

    published = snapshot.read_flows()
    assert backend.pk not in published["backends"]


def test_beat_rows_of_the_old_task_name_are_renamed_and_back() -> None:
    migration = importlib.import_module("chatflows.migrations.0002_rename_discover_flows_task")
    every_minute, _ = IntervalSchedule.objects.get_or_create(every=60, period="seconds")
    PeriodicTask.objects.filter(task="chatflows.discover_flows").delete()
    PeriodicTask.objects.create(
        name="Discover flows", task="backends.discover_flows", interval=every_minute, enabled=False
    )
    before = PeriodicTasks.last_change()

    migration.forwards(apps, None)

    renamed = PeriodicTask.objects.get(name="Discover flows")
    assert (renamed.task, renamed.enabled) == ("chatflows.discover_flows", False)
    assert PeriodicTasks.last_change() != before  # a running beat reloads its schedule
    migration.backwards(apps, None)
    assert PeriodicTask.objects.get(name="Discover flows").task == "backends.discover_flows"


@respx.mock
def test_the_listing_shows_when_flowise_created_each_flow(backend: Backend) -> None:
    """Seed 003's list_chatflows shows createdDate: discovery keeps what Flowise said
    (the listing had none)."""
    _mock_flowise_pages(backend.base_url)
    listed = [f for page in (1, 2) for f in body("flowise", f"chatflows_page{page}")["data"]]

    discover_flows()

    shown = {f["id"]: f["createdDate"] for f in chatflows_list(tenant=None)}
    assert shown == {f["id"]: f["createdDate"] for f in listed}
    assert all(shown.values())

"""load_defaults installs the seed intents, scope patterns and policy, idempotently."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command
from django_celery_beat.models import PeriodicTask

from flywheel.models import Tenant
from routing.models import (
    ClassifierModel,
    Intent,
    IntentExample,
    IntentPattern,
    QueryTypeExample,
    RoutingPolicy,
    ScopePattern,
)

pytestmark = pytest.mark.django_db

SEED_INTENTS = {
    "creative-orientation",
    "technical-analysis",
    "document-qa",
    "code-review",
    "general",
    "summarize",
    "conversation-query",
}


def _counts() -> tuple[int, ...]:
    return (
        Intent.objects.count(),
        IntentPattern.objects.count(),
        ScopePattern.objects.count(),
        RoutingPolicy.objects.count(),
        Tenant.objects.count(),
        IntentExample.objects.count(),
        QueryTypeExample.objects.count(),
        ClassifierModel.objects.count(),  # the same examples: no new version
    )


def test_it_installs_the_seed_intents_scopes_and_policy() -> None:
    call_command("load_defaults", stdout=StringIO())

    assert set(Intent.objects.values_list("slug", flat=True)) == SEED_INTENTS
    assert IntentPattern.objects.filter(intent__slug="code-review").exists()
    assert set(ScopePattern.objects.values_list("scope", flat=True)) == {"global", "local"}
    policy = RoutingPolicy.objects.get()
    assert (policy.weight_match, policy.weight_health, policy.weight_performance) == (0.5, 0.3, 0.2)
    assert Tenant.objects.filter(slug="default").exists()


def test_running_it_twice_changes_nothing() -> None:
    first = StringIO()
    call_command("load_defaults", stdout=first)
    before = _counts()
    out = StringIO()

    call_command("load_defaults", stdout=out)

    assert _counts() == before
    assert (
        "0 intent(s), 0 pattern(s), 0 scope pattern(s), 0 example(s) created; policy kept"
        in out.getvalue()
    )
    # The first run said what it was waiting on before each training; the second trains
    # nothing, so it has nothing to wait for.
    trainings = [line for line in first.getvalue().splitlines() if line.startswith("Training")]
    assert [line.split(" classifier on ")[0] for line in trainings] == [
        "Training the intent",
        "Training the query_type",
    ]
    assert "Training" not in out.getvalue()


def test_admin_edits_survive_running_it_again() -> None:
    call_command("load_defaults", stdout=StringIO())
    Intent.objects.filter(slug="general").update(name="Anything else", enabled=False)
    removed = IntentPattern.objects.filter(intent__slug="code-review").first()
    assert removed is not None
    removed.delete()
    ScopePattern.objects.filter(scope="global").delete()
    ScopePattern.objects.create(scope="global", kind="keyword", pattern="landscape")
    RoutingPolicy.objects.update(weight_match=0.9, confidence_threshold=0.5)

    call_command("load_defaults", stdout=StringIO())

    general = Intent.objects.get(slug="general")
    assert (general.name, general.enabled) == ("Anything else", False)
    assert not IntentPattern.objects.filter(
        intent__slug="code-review", kind=removed.kind, pattern=removed.pattern
    ).exists()
    assert list(ScopePattern.objects.filter(scope="global").values_list("pattern", flat=True)) == [
        "landscape"
    ]
    policy = RoutingPolicy.objects.get()
    assert (policy.weight_match, policy.confidence_threshold) == (0.9, 0.5)


def test_a_deleted_default_intent_comes_back_with_its_patterns() -> None:
    call_command("load_defaults", stdout=StringIO())
    Intent.objects.filter(slug="summarize").delete()

    call_command("load_defaults", stdout=StringIO())

    assert IntentPattern.objects.filter(intent__slug="summarize").exists()


def test_it_schedules_health_and_discovery_in_the_database() -> None:
    call_command("load_defaults", stdout=StringIO())

    tasks = {t.task: t.interval.every for t in PeriodicTask.objects.select_related("interval")}
    assert tasks == {
        "backends.check_health": 30,
        "chatflows.discover_flows": 60,
        "routing.publish_performance": 300,
        "analytics.rollup_decisions": 60,
        "routing.train_classifiers": 60,
        "analytics.apply_retention": 3600,
        "analytics.pack_indexes": 3600,
    }


def test_schedule_edits_survive_running_it_again() -> None:
    call_command("load_defaults", stdout=StringIO())
    PeriodicTask.objects.filter(task="backends.check_health").update(enabled=False)

    call_command("load_defaults", stdout=StringIO())

    assert PeriodicTask.objects.count() == 7
    assert PeriodicTask.objects.get(task="backends.check_health").enabled is False

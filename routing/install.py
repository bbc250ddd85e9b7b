"""Installing what Flywheel ships with: the default tenant, intents, patterns, policy, schedules."""

from __future__ import annotations

from dataclasses import dataclass

from django.db import transaction

from backends.schedules import schedules_install
from flywheel.services import tenant_get_or_create_default
from routing.classification.shipped import (
    DEFAULT_INTENTS,
    DEFAULT_SCOPE_PATTERNS,
    DefaultPattern,
)
from routing.classification.training import examples_load_shipped
from routing.models import (
    Intent,
    IntentPattern,
    PatternKind,
    RoutingPolicy,
    ScopePattern,
)


@dataclass(frozen=True)
class DefaultsReport:
    intents_created: int
    patterns_created: int
    scope_patterns_created: int
    policy_created: bool
    schedules_created: int
    examples_created: int = 0


def _kind(pattern: DefaultPattern) -> str:
    return PatternKind.REGEX if pattern.is_regex else PatternKind.KEYWORD


@transaction.atomic
def defaults_load() -> DefaultsReport:
    """Install the default tenant, intents, patterns, policy and periodic tasks; idempotent.

    Only what is missing is created and nothing is updated, so an admin's edits
    survive. An intent's default patterns are installed only together with the
    intent, and a scope's only while that scope has no patterns at all: a rule
    an admin deleted does not come back.
    """
    tenant_get_or_create_default()
    intents_created = patterns_created = scope_created = 0
    for default in DEFAULT_INTENTS:
        intent, created = Intent.objects.get_or_create(
            slug=default.slug,
            defaults={
                "name": default.name,
                "description": default.description,
                "priority": default.priority,
            },
        )
        if not created:
            continue
        intents_created += 1
        for pattern in default.patterns:
            IntentPattern(
                intent=intent, kind=_kind(pattern), pattern=pattern.pattern, weight=pattern.weight
            ).save()
            patterns_created += 1
    for scope, patterns in DEFAULT_SCOPE_PATTERNS.items():
        if ScopePattern.objects.filter(scope=scope).exists():
            continue
        for pattern in patterns:
            ScopePattern(
                scope=scope, kind=_kind(pattern), pattern=pattern.pattern, weight=pattern.weight
            ).save()
            scope_created += 1
    _, policy_created = RoutingPolicy.objects.get_or_create(key="default")
    schedules_created = schedules_install()
    return DefaultsReport(
        intents_created,
        patterns_created,
        scope_created,
        policy_created,
        schedules_created,
        examples_load_shipped(),
    )

"""Routing services that write: installing defaults, reading the policy, corrections."""

from __future__ import annotations

from dataclasses import dataclass

from django.db import transaction
from django.utils import timezone

from backends.policy import HealthPolicy
from backends.schedules import schedules_install
from flywheel.errors import ValidationError
from flywheel.services import tenant_get_or_create_default
from routing.classifier import examples_load_shipped
from routing.defaults import DEFAULT_INTENTS, DEFAULT_SCOPE_PATTERNS, DefaultPattern
from routing.models import (
    ExampleSource,
    Intent,
    IntentExample,
    IntentPattern,
    PatternKind,
    RoutingDecision,
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


def routing_policy_get() -> RoutingPolicy:
    """Return the routing policy, creating it with the defaults if it is missing."""
    policy, _ = RoutingPolicy.objects.get_or_create(key="default")
    return policy


def routing_health_policy() -> HealthPolicy:
    """The policy's health numbers, for backends (registered in routing/apps.py)."""
    policy = routing_policy_get()
    return HealthPolicy(
        cooldown_failures=policy.cooldown_failures,
        cooldown_seconds=policy.cooldown_seconds,
        health_cache_ttl_seconds=policy.health_cache_ttl_seconds,
        flow_cache_ttl_seconds=policy.flow_cache_ttl_seconds,
    )


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


@transaction.atomic
def decision_correct(*, decision: RoutingDecision, intent: str) -> RoutingDecision:
    """Say what ``decision``'s intent really was.

    The decision keeps the intent it detected and records the correction; its
    question becomes a ``correction`` example of ``intent`` (replacing an earlier
    label people gave the same question), so the classifier is retrained (a
    worker task, at commit) and the same question gets ``intent`` once the new
    version is in use (seconds; beat's check within a minute without a worker).
    Raises ValidationError for an unknown or disabled intent.
    """
    target = Intent.objects.filter(slug=intent, enabled=True).first()
    if target is None:
        known = sorted(Intent.objects.filter(enabled=True).values_list("slug", flat=True))
        raise ValidationError(
            f"Unknown or disabled intent {intent!r}.", details={"intent": intent, "known": known}
        )
    # What people said of this question before (an admin, an earlier correction, the LLM)
    # gives way; a shipped example stays, and exact recall follows people's labels only.
    IntentExample.objects.filter(text=decision.question).exclude(intent=target).exclude(
        source=ExampleSource.SHIPPED
    ).delete()
    IntentExample.objects.update_or_create(
        intent=target, text=decision.question, defaults={"source": ExampleSource.CORRECTION}
    )
    decision.corrected_intent, decision.corrected_at = target.slug, timezone.now()
    decision.save(update_fields=["corrected_intent", "corrected_at"])
    return decision

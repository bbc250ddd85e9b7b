"""Constraints and uniqueness hold in the database itself, not only in forms."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction

from analytics.models import DecisionRollup
from backends.models import Backend, BackendHealth, HealthCheck
from chatflows.models import Flow
from flywheel.models import Tenant
from routing.models import (
    Intent,
    IntentPattern,
    PerformanceRecord,
    RoutingDecision,
    RoutingPolicy,
    ScopePattern,
    Session,
    Turn,
)

pytestmark = pytest.mark.django_db


def _violates(create) -> bool:
    try:
        with transaction.atomic():
            create()
    except IntegrityError:
        return True
    return False


def test_tenant_names_are_unique_ignoring_case(tenant: Tenant) -> None:
    assert _violates(lambda: Tenant.objects.create(name="ACME", slug="acme-2"))


def test_backend_names_are_unique_ignoring_case(backend: Backend) -> None:
    assert _violates(
        lambda: Backend.objects.create(name="Flowise-Main", kind="flowise", base_url="http://x")
    )


def test_backend_kind_must_be_flowise_or_langflow(db) -> None:
    assert _violates(lambda: Backend.objects.create(name="b", kind="other", base_url="http://x"))


def test_backend_timeout_must_be_positive(db) -> None:
    assert _violates(
        lambda: Backend.objects.create(
            name="b", kind="langflow", base_url="http://x", timeout_seconds=0
        )
    )


def test_backend_weight_cannot_be_negative(db) -> None:
    assert _violates(
        lambda: Backend.objects.create(name="b", kind="langflow", base_url="http://x", weight=-1)
    )


def test_backend_health_and_history_belong_to_the_backend(backend: Backend) -> None:
    BackendHealth.objects.create(backend=backend, healthy=True, latency_ms=12.5)
    HealthCheck.objects.create(backend=backend, ok=True, latency_ms=12.5)

    backend.delete()

    assert not BackendHealth.objects.exists()
    assert not HealthCheck.objects.exists()


def test_a_flow_is_unique_per_backend_and_external_id(backend: Backend) -> None:
    other = Backend.objects.create(name="langflow", kind="langflow", base_url="http://y")
    Flow.objects.create(backend=backend, external_id="abc", name="Echo")

    Flow.objects.create(backend=other, external_id="abc", name="Echo elsewhere")

    assert _violates(lambda: Flow.objects.create(backend=backend, external_id="abc", name="Dup"))


def test_flow_scope_must_be_a_known_scope(backend: Backend) -> None:
    assert _violates(
        lambda: Flow.objects.create(backend=backend, external_id="x", name="n", scope="wide")
    )


def test_routable_flows_are_active_deployed_and_on_enabled_backends(backend: Backend) -> None:
    disabled = Backend.objects.create(
        name="off", kind="langflow", base_url="http://y", enabled=False
    )
    routable = Flow.objects.create(backend=backend, external_id="1", name="a", deployed=True)
    Flow.objects.create(backend=backend, external_id="2", name="b", deployed=False)
    Flow.objects.create(
        backend=backend, external_id="3", name="c", deployed=True, removed_at=datetime.now(UTC)
    )
    Flow.objects.create(backend=disabled, external_id="4", name="d", deployed=True)

    assert list(Flow.objects.routable()) == [routable]


def test_intent_slugs_are_unique(db) -> None:
    Intent.objects.create(slug="general", name="General")

    assert _violates(lambda: Intent.objects.create(slug="general", name="Again"))


def test_a_pattern_is_unique_per_intent(db) -> None:
    intent = Intent.objects.create(slug="code-review", name="Code review")
    IntentPattern.objects.create(intent=intent, kind="keyword", pattern="refactor")

    assert _violates(
        lambda: IntentPattern.objects.create(intent=intent, kind="keyword", pattern="refactor")
    )


def test_an_unsafe_regex_is_refused_whichever_door_saves_it(db) -> None:
    intent = Intent.objects.create(slug="x", name="X")

    with pytest.raises(ValidationError) as raised:
        IntentPattern.objects.create(intent=intent, kind="regex", pattern="(a+)+$")

    assert "backtrack catastrophically" in str(raised.value)
    assert not IntentPattern.objects.exists()


def test_an_invalid_scope_regex_is_refused(db) -> None:
    with pytest.raises(ValidationError, match="Not a valid regular expression"):
        ScopePattern.objects.create(scope="local", kind="regex", pattern="what is (")


def test_pattern_weight_must_be_positive(db) -> None:
    intent = Intent.objects.create(slug="x", name="X")

    with pytest.raises(ValidationError):
        IntentPattern(intent=intent, pattern="x", weight=0).full_clean()
    assert _violates(
        lambda: IntentPattern.objects.bulk_create(
            [IntentPattern(intent=intent, pattern="x", weight=0)]
        )
    )


def test_there_is_only_one_routing_policy(db) -> None:
    policy = RoutingPolicy.objects.create()

    assert (policy.weight_match, policy.weight_health, policy.weight_performance) == (0.5, 0.3, 0.2)
    assert (policy.performance_window, policy.latency_ceiling_ms) == (100, 5000)
    learning = (policy.half_life_seconds, policy.failure_cost_seconds, policy.prior_strength)
    assert learning == (40.0, 5.0, 2.0)
    assert (policy.half_life_attempts, policy.exploration) == (50.0, 0.5)
    assert policy.confidence_threshold == 0.7
    assert _violates(lambda: RoutingPolicy.objects.create())
    assert _violates(lambda: RoutingPolicy.objects.create(key="second"))


def test_routing_policy_weights_stay_in_the_unit_interval(db) -> None:
    assert _violates(lambda: RoutingPolicy.objects.create(weight_match=1.5))


def test_routing_policy_needs_a_non_zero_weight(db) -> None:
    policy = RoutingPolicy(weight_match=0, weight_health=0, weight_performance=0)

    with pytest.raises(ValidationError, match="weight"):
        policy.full_clean()


def test_turns_are_kept_in_order_within_a_session(tenant: Tenant, backend: Backend) -> None:
    session = Session.objects.create(tenant=tenant)
    Turn.objects.create(session=session, question="first", answer="1", backend=backend)
    Turn.objects.create(session=session, question="second", answer="2", backend=backend)

    assert [t.question for t in session.turns.all()] == ["first", "second"]


def test_decision_outcome_must_be_known(tenant: Tenant) -> None:
    assert _violates(
        lambda: RoutingDecision.objects.create(tenant=tenant, question="q", outcome="maybe")
    )


def test_a_decision_is_stored_once_per_request_id_and_moment(tenant: Tenant) -> None:
    # The key holds created_at, which a partitioned table's unique keys must; a replay
    # repeats both (DecisionData.created_at).
    first = RoutingDecision.objects.create(tenant=tenant, question="q", outcome="success")

    assert _violates(
        lambda: RoutingDecision.objects.create(
            tenant=tenant,
            question="q",
            outcome="success",
            request_id=first.request_id,
            created_at=first.created_at,
        )
    )


def test_a_decision_outlives_its_backend_and_flow(tenant: Tenant, backend: Backend) -> None:
    flow = Flow.objects.create(backend=backend, external_id="f", name="f")
    decision = RoutingDecision.objects.create(
        tenant=tenant, question="q", outcome="success", backend=backend, flow=flow
    )

    backend.delete()

    decision.refresh_from_db()
    assert (decision.backend, decision.flow) == (None, None)


def test_performance_latency_cannot_be_negative(backend: Backend) -> None:
    assert _violates(
        lambda: PerformanceRecord.objects.create(
            backend=backend, intent="general", latency_ms=-1, success=True
        )
    )


def test_one_rollup_row_per_bucket_tenant_backend_and_intent(
    tenant: Tenant, backend: Backend
) -> None:
    hour = datetime(2026, 1, 1, 10, tzinfo=UTC)
    DecisionRollup.objects.create(bucket_start=hour, tenant=tenant, backend=backend, intent="x")
    DecisionRollup.objects.create(bucket_start=hour, tenant=tenant, backend=None, intent="x")

    assert _violates(
        lambda: DecisionRollup.objects.create(
            bucket_start=hour, tenant=tenant, backend=backend, intent="x"
        )
    )
    assert _violates(
        lambda: DecisionRollup.objects.create(
            bucket_start=hour, tenant=tenant, backend=None, intent="x"
        )
    )


def test_rollup_successes_cannot_exceed_count(tenant: Tenant) -> None:
    assert _violates(
        lambda: DecisionRollup.objects.create(
            bucket_start=datetime(2026, 1, 1, tzinfo=UTC), tenant=tenant, count=1, successes=2
        )
    )

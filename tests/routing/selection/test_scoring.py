"""Scoring (seed 000): match, health and performance, weighted by the policy."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from routing.selection.scoring import (
    BackendEntry,
    FlowEntry,
    HealthEntry,
    Performance,
    PolicyValues,
    match_score,
    performance_score,
    score_candidates,
    tokens_score,
)

NOW = datetime(2026, 1, 1, 12, tzinfo=UTC)
POLICY = PolicyValues()


def flow(backend_id: int, name: str, keywords: list[str], **fields: object) -> FlowEntry:
    return FlowEntry(
        id=hash((backend_id, name)) % 10_000,
        backend_id=backend_id,
        external_id=f"{backend_id}-{name}",
        name=name,
        keywords=frozenset(keywords),
        keyword_count=len(keywords),
        **fields,  # type: ignore[arg-type]
    )


def backend(backend_id: int, name: str, *flows: FlowEntry, weight: float = 1.0) -> BackendEntry:
    return BackendEntry(id=backend_id, name=name, kind="flowise", weight=weight, flows=flows)


HEALTHY = {1: HealthEntry(True), 2: HealthEntry(True)}


def test_match_grows_with_keyword_specificity() -> None:
    assert match_score(flow(1, "a", ["code-review"]), "code-review") == pytest.approx(0.55)
    ten = ["code-review", *[f"k{i}" for i in range(9)]]
    assert match_score(flow(1, "b", ten), "code-review") == 1.0
    assert match_score(flow(1, "c", ["document-qa"]), "code-review") == 0.0


def test_generic_flows_serve_any_intent_at_half_the_match() -> None:
    generic = flow(1, "g", ["general"], is_generic=True)

    assert match_score(generic, "code-review") == pytest.approx(0.5 * 0.55)


def test_performance_blends_success_rate_and_latency() -> None:
    assert performance_score(None, 5000) == 0.5
    assert performance_score(Performance(10, 1.0, 0.0), 5000) == 1.0
    assert performance_score(Performance(10, 0.5, 2500), 5000) == pytest.approx(0.35 + 0.15)
    assert performance_score(Performance(10, 1.0, 9000), 5000) == pytest.approx(0.7)


def test_the_composite_score_uses_the_policy_weights() -> None:
    candidates = score_candidates(
        [backend(1, "fw", flow(1, "review", ["code-review"]))],
        intent="code-review",
        health=HEALTHY,
        performance={},
        policy=POLICY,
        now=NOW,
    )

    (only,) = candidates
    assert (only.match, only.health, only.performance) == (0.55, 1.0, 0.5)
    assert only.score == pytest.approx(0.5 * 0.55 + 0.3 * 1.0 + 0.2 * 0.5)


def test_an_edited_policy_changes_the_weights_and_the_latency_ceiling() -> None:
    policy = PolicyValues(
        weight_match=0.2, weight_health=0.1, weight_performance=0.7, latency_ceiling_ms=1000.0
    )
    slow = Performance(attempts=10, success_rate=1.0, avg_latency_ms=500.0)

    (only,) = score_candidates(
        [backend(1, "fw", flow(1, "review", ["code-review"]))],
        intent="code-review",
        health=HEALTHY,
        performance={1: slow},
        policy=policy,
        now=NOW,
    )

    assert only.performance == pytest.approx(0.7 * 1.0 + 0.3 * (1 - 500 / 1000))
    assert only.score == pytest.approx(0.2 * 0.55 + 0.1 * 1.0 + 0.7 * only.performance)


def test_auto_routing_orders_by_score() -> None:
    specific = backend(1, "fw", flow(1, "review", ["code-review", "refactor", "pull request"]))
    plain = backend(2, "lf", flow(2, "review", ["code-review"]))

    ranked = score_candidates(
        [plain, specific],
        intent="code-review",
        health=HEALTHY,
        performance={},
        policy=POLICY,
        now=NOW,
    )

    assert [c.backend.name for c in ranked] == ["fw", "lf"]


def test_an_unhealthy_backend_ranks_below_a_healthy_one() -> None:
    a = backend(1, "fw", flow(1, "x", ["code-review"]))
    b = backend(2, "lf", flow(2, "x", ["code-review"]))

    ranked = score_candidates(
        [a, b],
        intent="code-review",
        health={1: HealthEntry(False), 2: HealthEntry(True)},
        performance={},
        policy=POLICY,
        now=NOW,
    )

    assert [c.backend.name for c in ranked] == ["lf", "fw"]
    assert ranked[1].health == 0.0


def test_a_backend_in_cooldown_is_not_a_candidate() -> None:
    a = backend(1, "fw", flow(1, "x", ["code-review"]))
    cooling = {1: HealthEntry(True, cooldown_until=NOW + timedelta(seconds=30))}

    assert (
        score_candidates(
            [a], intent="code-review", health=cooling, performance={}, policy=POLICY, now=NOW
        )
        == []
    )
    cooled = {1: HealthEntry(True, cooldown_until=NOW - timedelta(seconds=1))}
    assert score_candidates(
        [a], intent="code-review", health=cooled, performance={}, policy=POLICY, now=NOW
    )


def test_performance_history_can_change_the_order() -> None:
    a = backend(1, "fw", flow(1, "x", ["code-review"]))
    b = backend(2, "lf", flow(2, "x", ["code-review"]))
    history = {1: Performance(10, 0.2, 4800), 2: Performance(10, 1.0, 100)}

    ranked = score_candidates(
        [a, b], intent="code-review", health=HEALTHY, performance=history, policy=POLICY, now=NOW
    )

    assert [c.backend.name for c in ranked] == ["lf", "fw"]
    assert ranked[0].performance > ranked[1].performance


def test_the_best_flow_of_a_backend_is_chosen() -> None:
    weak = flow(1, "weak", ["code-review"])
    strong = flow(1, "strong", ["code-review", "refactor", "lint", "pull request"])
    other = flow(1, "docs", ["document-qa"])

    (only,) = score_candidates(
        [backend(1, "fw", weak, strong, other)],
        intent="code-review",
        health=HEALTHY,
        performance={},
        policy=POLICY,
        now=NOW,
    )

    assert only.flow.name == "strong"


def test_backends_without_a_matching_flow_are_left_out() -> None:
    assert (
        score_candidates(
            [backend(1, "fw", flow(1, "docs", ["document-qa"]))],
            intent="code-review",
            health=HEALTHY,
            performance={},
            policy=POLICY,
            now=NOW,
        )
        == []
    )


def test_scope_favours_flows_that_fit_the_query_type() -> None:
    global_flow = backend(1, "fw", flow(1, "themes", ["document-qa"], scope="global"))
    local_flow = backend(2, "lf", flow(2, "facts", ["document-qa"], scope="local"))

    for query_type, first in (("GLOBAL", "fw"), ("LOCAL", "lf")):
        ranked = score_candidates(
            [global_flow, local_flow],
            intent="document-qa",
            health=HEALTHY,
            performance={},
            policy=POLICY,
            now=NOW,
            query_type=query_type,
        )
        assert ranked[0].backend.name == first


def test_ties_go_to_the_heavier_backend_then_the_name() -> None:
    a = backend(1, "b-second", flow(1, "x", ["general"]), weight=1.0)
    b = backend(2, "a-first", flow(2, "x", ["general"]), weight=1.0)
    c = backend(3, "heavy", flow(3, "x", ["general"]), weight=2.0)
    health = {1: HealthEntry(True), 2: HealthEntry(True), 3: HealthEntry(True)}

    ranked = score_candidates(
        [a, b, c], intent="general", health=health, performance={}, policy=POLICY, now=NOW
    )

    assert [r.backend.name for r in ranked] == ["heavy", "a-first", "b-second"]


def test_token_usage_counts_only_with_its_weight_and_favours_fewer_tokens() -> None:
    two = [
        backend(1, "thrifty", flow(1, "a", ["code-review"])),
        backend(2, "lavish", flow(2, "b", ["code-review"]), weight=2.0),
    ]
    usage = {
        1: Performance(10, 1.0, 100.0, avg_tokens=400.0),
        2: Performance(10, 1.0, 100.0, avg_tokens=3600.0),
    }

    def ranked(policy: PolicyValues) -> list[str]:
        found = score_candidates(
            two, intent="code-review", health=HEALTHY, performance=usage, policy=policy, now=NOW
        )
        return [c.backend.name for c in found]

    assert ranked(POLICY) == ["lavish", "thrifty"]  # off by default: a tie, weight decides
    assert ranked(PolicyValues(weight_tokens=0.2)) == ["thrifty", "lavish"]


def test_the_token_factor_is_neutral_without_reported_usage() -> None:
    assert tokens_score(None, 4000) == 0.5
    assert tokens_score(Performance(10, 1.0, 0.0), 4000) == 0.5
    assert tokens_score(Performance(10, 1.0, 0.0, avg_tokens=1000.0), 4000) == 0.75
    assert tokens_score(Performance(10, 1.0, 0.0, avg_tokens=9000.0), 4000) == 0.0

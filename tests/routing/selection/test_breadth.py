"""The query type's weights (seed 004) decide how much a flow's scope counts.

A flow's fit is the weight of its own scope: a global flow's the question's
global_weight, a local one's its local_weight. At 0.5 nothing changes; towards 1
the match gains up to SCOPE_FIT_BONUS and the expected time shrinks up to
SCOPE_FIT_TIME; towards 0 the match falls to SCOPE_MISFIT_FACTOR of itself and the
time grows up to SCOPE_MISFIT_TIME. So a HYBRID question uses its weights too.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime

import pytest

from routing.classification.query_type import HYBRID, QueryTypeDecision
from routing.selection.breadth import (
    SCOPE_FIT_BONUS,
    SCOPE_FIT_TIME,
    SCOPE_MISFIT_FACTOR,
    SCOPE_MISFIT_TIME,
    scope_adjusted,
    scope_fit,
    scope_lean,
)
from routing.selection.estimates import estimate
from routing.selection.scoring import (
    BackendEntry,
    Candidate,
    FlowEntry,
    HealthEntry,
    PolicyValues,
    score_candidates,
)

NOW = datetime(2026, 1, 1, 12, tzinfo=UTC)
POLICY = PolicyValues(exploration=0.0)
UNMEASURED = estimate(None, POLICY.prior)
KEYWORDS = frozenset({"document-qa", "a", "b", "c"})  # match 0.7 for document-qa


def flow(flow_id: int, scope: str) -> FlowEntry:
    return FlowEntry(
        id=flow_id,
        backend_id=flow_id,
        external_id=f"f{flow_id}",
        name=f"{scope}-flow",
        keywords=KEYWORDS,
        keyword_count=len(KEYWORDS),
        scope=scope,
    )


GLOBAL_FLOW, LOCAL_FLOW, ANY_FLOW = flow(1, "global"), flow(2, "local"), flow(3, "any")


def hybrid(global_weight: float) -> QueryTypeDecision:
    return QueryTypeDecision(
        HYBRID, 0.5, "Both matched.", global_weight, round(1 - global_weight, 4)
    )


def ranked(global_weight: float | None, *flows: FlowEntry) -> list[Candidate]:
    """Otherwise equal backends, one flow each, nothing measured, so only scope differs
    (the local backend named first, so a name tie-break would favour it)."""
    backends: Iterable[BackendEntry] = [
        BackendEntry(
            id=f.id,
            name=f"{'a' if f.scope == 'local' else 'b'}-{f.scope}",
            kind="flowise",
            flows=(f,),
        )
        for f in flows
    ]
    return score_candidates(
        backends,
        intent="document-qa",
        health={f.id: HealthEntry(True) for f in flows},
        estimate_of=lambda b, f: UNMEASURED,
        policy=POLICY,
        now=NOW,
        global_weight=global_weight,
    )


def test_a_hybrid_question_weighted_towards_global_prefers_the_global_flow() -> None:
    decision = hybrid(0.7)

    first, second = ranked(decision.global_weight, LOCAL_FLOW, GLOBAL_FLOW)

    assert (first.flow.scope, second.flow.scope) == ("global", "local")
    assert first.expected_seconds < second.expected_seconds
    assert first.match > 0.7 > second.match  # mildly: less than the full nudge
    assert first.match < 0.7 + SCOPE_FIT_BONUS
    assert second.match > 0.7 * SCOPE_MISFIT_FACTOR


def test_a_hybrid_question_weighted_towards_local_prefers_the_local_flow() -> None:
    first, second = ranked(hybrid(0.3).global_weight, GLOBAL_FLOW, LOCAL_FLOW)

    assert (first.flow.scope, second.flow.scope) == ("local", "global")
    assert first.expected_seconds < second.expected_seconds
    assert first.match > 0.7 > second.match


def test_a_50_50_hybrid_question_prefers_neither() -> None:
    """Neither scope counts: what is left to decide is the tie-break (the name)."""
    local, global_ = ranked(hybrid(0.5).global_weight, LOCAL_FLOW, GLOBAL_FLOW)

    assert local.match == global_.match == 0.7
    assert local.expected_seconds == global_.expected_seconds
    assert local.stretch == global_.stretch == 1.0


def test_a_full_weight_global_question_gets_exactly_the_full_nudge() -> None:
    """GLOBAL (global_weight 1.0) and LOCAL (0.0) keep the all-or-nothing rule of old."""
    for score in (0.55, 0.7, 0.95):
        assert scope_adjusted(score, GLOBAL_FLOW, 1.0) == min(1.0, score + SCOPE_FIT_BONUS)
        assert scope_adjusted(score, LOCAL_FLOW, 1.0) == score * SCOPE_MISFIT_FACTOR
        assert scope_adjusted(score, LOCAL_FLOW, 0.0) == min(1.0, score + SCOPE_FIT_BONUS)
        assert scope_adjusted(score, GLOBAL_FLOW, 0.0) == score * SCOPE_MISFIT_FACTOR
    assert scope_fit(GLOBAL_FLOW, 1.0) == scope_fit(LOCAL_FLOW, 0.0) == SCOPE_FIT_TIME
    assert scope_fit(LOCAL_FLOW, 1.0) == scope_fit(GLOBAL_FLOW, 0.0) == SCOPE_MISFIT_TIME


def test_the_nudge_grows_linearly_with_the_weight_of_the_flows_scope() -> None:
    assert scope_lean(GLOBAL_FLOW, 0.75) == pytest.approx(0.5)
    assert scope_lean(LOCAL_FLOW, 0.75) == pytest.approx(-0.5)
    assert scope_adjusted(0.7, GLOBAL_FLOW, 0.75) == pytest.approx(0.7 + SCOPE_FIT_BONUS / 2)
    assert scope_adjusted(0.7, LOCAL_FLOW, 0.75) == pytest.approx(
        0.7 * (1 + SCOPE_MISFIT_FACTOR) / 2
    )
    assert scope_fit(GLOBAL_FLOW, 0.75) == pytest.approx((1 + SCOPE_FIT_TIME) / 2)
    assert scope_fit(LOCAL_FLOW, 0.75) == pytest.approx((1 + SCOPE_MISFIT_TIME) / 2)
    assert scope_adjusted(0.95, GLOBAL_FLOW, 0.75) == pytest.approx(0.975)  # towards the cap


@pytest.mark.parametrize("global_weight", [None, 0.0, 0.3, 0.5, 0.7, 1.0])
def test_a_flow_of_any_scope_and_a_question_without_a_type_are_left_as_they_are(
    global_weight: float | None,
) -> None:
    assert scope_adjusted(0.7, ANY_FLOW, global_weight) == 0.7
    assert scope_fit(ANY_FLOW, global_weight) == 1.0
    assert scope_adjusted(0.7, GLOBAL_FLOW, None) == 0.7
    assert scope_fit(LOCAL_FLOW, None) == 1.0
    assert scope_adjusted(0.0, GLOBAL_FLOW, global_weight) == 0.0  # no match stays none

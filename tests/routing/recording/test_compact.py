"""What a decision row keeps of its candidates, fallback chain and evidence, and how it
reads back: the same as the answer gave them, with names from today's rows, whichever
shape the row was written in."""

from __future__ import annotations

from typing import Any

import pytest

from backends.models import Backend
from chatflows.models import Flow
from flywheel.models import Tenant
from routing.models import Intent, IntentPattern, RoutingDecision, ScopePattern
from routing.recording.compact import (
    Names,
    names_for,
    pack_attempts,
    pack_candidates,
    pack_rules,
    read,
    summary_said_again,
    unpack_attempts,
    unpack_candidates,
)
from routing.selection.attempt import Attempt
from routing.selection.estimates import Prior, estimate
from routing.selection.scoring import BackendEntry, Candidate, FlowEntry
from routing.selection.words import why

FACTORS = ("match", "health", "performance", "tokens")  # the score's, not kept


def _candidate(backend: Backend, flow: Flow, **changes: Any) -> Candidate:
    entry = FlowEntry(flow.pk, backend.pk, flow.external_id, flow.name, frozenset(), 1)
    values: dict[str, Any] = {
        "backend": BackendEntry(backend.pk, backend.name, backend.kind, flows=(entry,)),
        "flow": entry,
        "match": 0.55,
        "health": 1.0,
        "performance": 0.61234,
        "score": 0.6712345,
        "estimate": estimate(None, Prior()),
        "expected_seconds": 1.23456,
    }
    return Candidate(**{**values, **changes})


@pytest.fixture
def flow(backend: Backend) -> Flow:
    return Flow.objects.create(backend=backend, external_id="ext-7", name="Reviewer")


@pytest.fixture
def generic(backend: Backend) -> Flow:
    return Flow.objects.create(backend=backend, external_id="ext-8", name="Anything")


# --- candidates ---------------------------------------------------------------------


@pytest.mark.django_db
def test_candidates_read_back_as_the_answer_gave_them_but_the_factors(
    backend: Backend, flow: Flow, generic: Flow
) -> None:
    ranked = [
        _candidate(backend, flow, arm="B"),
        _candidate(backend, generic, generic=True, score=0.3),
    ]
    packed = pack_candidates(ranked)

    read_back = unpack_candidates(packed, names_for([_row(candidates=packed)]))

    shown: list[dict[str, Any]] = [c.as_dict() for c in ranked]
    for c in shown:
        c["score"] = round(c["score"], 3)  # as the trace shows it
        for factor in FACTORS:
            del c[factor]
    assert read_back == shown
    assert why(read_back, intent="code-review") == why(
        [c.as_dict() for c in ranked], intent="code-review"
    )


@pytest.mark.django_db
def test_a_candidate_is_kept_as_ids_and_numbers(backend: Backend, flow: Flow) -> None:
    (packed,) = pack_candidates([_candidate(backend, flow)])

    assert packed[:3] == [backend.pk, flow.pk, 0.671]
    assert packed[-1] is False  # not generic, and no arm: nothing after it
    assert not any(isinstance(v, str) for v in packed)


def test_a_deleted_backend_or_flow_reads_as_deleted() -> None:
    packed = [[3, 7, 0.5, 0.9, 0.1, 120.0, 4.0, 0.2, False]]

    (candidate,) = unpack_candidates(packed, Names())

    assert (candidate["backend"], candidate["kind"]) == ("deleted backend #3", None)
    assert (candidate["flow"], candidate["flow_id"]) == ("deleted flow #7", None)


def test_candidates_of_the_earlier_shape_read_as_they_are() -> None:
    earlier = [{"backend": "fw", "kind": "flowise", "flow": "Reviewer", "score": 0.8}]

    assert unpack_candidates(earlier, Names()) == earlier


# --- the fallback chain -------------------------------------------------------------


def _attempt(**changes: Any) -> Attempt:
    values: dict[str, Any] = {
        "backend_id": 3,
        "backend": "fw",
        "flow_id": 7,
        "flow": "Reviewer",
        "ok": True,
        "latency_ms": 412.46,
    }
    return Attempt(**{**values, **changes})


NAMES = Names(backends={3: ("fw", "flowise")}, flows={7: ("Reviewer", "ext-7")})


@pytest.mark.parametrize(
    "attempt",
    [
        _attempt(),
        _attempt(ok=False, error_type="BackendTimeout", error="no answer in 5 s"),
        _attempt(ok=False, error_type="Cancelled", hedged=True),
        _attempt(hedged=True),
    ],
)
def test_attempts_read_back_as_the_answer_gave_them(attempt: Attempt) -> None:
    (read_back,) = unpack_attempts(pack_attempts([attempt]), NAMES)

    assert read_back == {**attempt.as_dict(), "latency_ms": round(attempt.latency_ms, 1)}


def test_an_answered_attempt_is_four_values_and_a_failed_one_says_why() -> None:
    failed = _attempt(ok=False, error_type="UnexpectedError", error="boom")

    assert pack_attempts([_attempt(), failed]) == [
        [3, 7, True, 412.5],
        [3, 7, False, 412.5, "UnexpectedError", "boom"],
    ]


def test_an_attempt_of_a_deleted_backend_reads_as_deleted() -> None:
    (read_back,) = unpack_attempts([[4, 9, True, 10.0]], NAMES)

    assert (read_back["backend"], read_back["flow"]) == ("deleted backend #4", "deleted flow #9")


# --- evidence -----------------------------------------------------------------------


def test_matched_rules_are_kept_as_their_ids_and_other_evidence_as_text() -> None:
    evidence = ("below threshold: code-review at 0.55", r"\breview\b", "pull request")

    assert pack_rules(evidence, (12, 15)) == ["below threshold: code-review at 0.55", 12, 15]
    assert pack_rules(evidence, (12, 0)) == [evidence[0], 12, "pull request"]  # shipped
    assert pack_rules(("follow-up of: why?",), ()) == ["follow-up of: why?"]


def _row(**columns: Any) -> RoutingDecision:
    """A decision as read from the database (not saved)."""
    given = {"question": "q", "intent": "code-review", "outcome": "success"}
    return RoutingDecision(**(given | columns))


@pytest.mark.django_db
def test_a_compact_row_reads_back_with_its_rules_texts_and_its_why(
    backend: Backend, flow: Flow
) -> None:
    intent, _ = Intent.objects.get_or_create(slug="code-review", defaults={"name": "Review"})
    rule = IntentPattern.objects.create(intent=intent, pattern="pull request")
    scope = ScopePattern.objects.create(scope="local", pattern="this file")
    ranked = [_candidate(backend, flow)]
    decision = _row(
        evidence={
            "intent": ["below threshold: x at 0.5", rule.pk, rule.pk + 1000],
            "intent_summary": "matched 'pull request' (code-review rule 1)",
            "query_type": {"reasoning": "Local.", "evidence": {"local": [scope.pk]}},
            "explored": True,
        },
        candidates=pack_candidates(ranked),
        fallback_chain=pack_attempts([_attempt(backend_id=backend.pk, flow_id=flow.pk)]),
    )

    kept = read(decision)

    assert kept.evidence == {
        "intent": ["below threshold: x at 0.5", "pull request", f"deleted rule #{rule.pk + 1000}"],
        "intent_summary": "matched 'pull request' (code-review rule 1)",
        "query_type": {"reasoning": "Local.", "evidence": {"local": ["this file"]}},
        "explored": "flowise-main",  # the first candidate's backend
        "why": why([c.as_dict() for c in ranked], explored=True, intent="code-review"),
    }
    assert [(a["backend"], a["flow"], a["ok"]) for a in kept.fallback_chain] == [
        ("flowise-main", "Reviewer", True)
    ]


@pytest.mark.django_db
def test_the_rules_summary_is_said_again_with_the_rules_as_they_read_today() -> None:
    intent, _ = Intent.objects.get_or_create(slug="code-review", defaults={"name": "Review"})
    review = IntentPattern.objects.create(intent=intent, pattern="review", weight=2)
    pr = IntentPattern.objects.create(intent=intent, pattern="pull request", weight=1)
    decision = _row(
        question="Please review my pull request",
        intent_method="rules",
        evidence={"intent": [review.pk, pr.pk]},
    )
    assert summary_said_again("rules", (review.pk, pr.pk))

    said = read(decision).evidence["intent_summary"]

    assert said == "matched 'review' and 'pull request' (code-review rules 1 and 2)"
    # Reweighted, the admin page lists the rule second: so does the summary.
    IntentPattern.objects.filter(pk=review.pk).update(weight=0.5)
    said = read(decision).evidence["intent_summary"]
    assert said == "matched 'review' and 'pull request' (code-review rules 2 and 1)"
    review_id, pr_id = review.pk, pr.pk
    pr.delete()
    assert read(decision).evidence["intent_summary"] == (
        f"matched 'review' (code-review rule 1) and deleted rule #{pr_id}"
    )
    review.delete()
    assert read(decision).evidence["intent_summary"] == (
        f"matched deleted rules #{review_id} and #{pr_id} (code-review)"
    )


@pytest.mark.django_db
def test_a_rules_decision_of_an_earlier_shape_without_a_summary_gains_none() -> None:
    decision = _row(intent_method="rules", evidence={"intent": ["review"]})

    assert "intent_summary" not in read(decision).evidence


@pytest.mark.django_db
def test_a_summary_the_rules_cannot_say_again_is_kept_and_read_as_kept() -> None:
    kept = "matched 'review' (code-review rule 1), but code-review at 0.55 is under the 0.70 threshold, so general"  # noqa: E501
    assert not summary_said_again("default", (3,))  # the threshold is not kept
    assert not summary_said_again("rules", (3, 0))  # a shipped rule, not in the database
    assert not summary_said_again("context", ())
    decision = _row(
        intent="general",
        intent_method="default",
        evidence={"intent": ["below threshold: code-review at 0.55", 3], "intent_summary": kept},
    )

    assert read(decision).evidence["intent_summary"] == kept


@pytest.mark.django_db
def test_a_row_of_the_earlier_shape_reads_as_it_was_kept(tenant: Tenant) -> None:
    earlier = {
        "evidence": {
            "intent": [r"\breview\b"],
            "intent_summary": "matched 'review' (code-review rule 1)",
            "explored": "fw",
            "why": "fw / Reviewer: score 0.80.",
        },
        "candidates": [{"backend": "fw", "kind": "flowise", "flow": "Reviewer", "score": 0.8}],
        "fallback_chain": [
            {"backend": "fw", "flow": "Reviewer", "ok": True, "latency_ms": 3.67, "error": ""}
        ],
    }
    decision = RoutingDecision.objects.create(
        tenant=tenant, question="q", outcome="success", **earlier
    )

    kept = read(RoutingDecision.objects.get(pk=decision.pk))

    assert (kept.evidence, kept.candidates, kept.fallback_chain) == (
        earlier["evidence"],
        earlier["candidates"],
        earlier["fallback_chain"],
    )


@pytest.mark.django_db
def test_the_names_of_a_page_of_decisions_take_a_query_per_kind_of_row(
    backend: Backend, flow: Flow, django_assert_num_queries: Any
) -> None:
    rows = [
        _row(
            candidates=pack_candidates([_candidate(backend, flow)]),
            fallback_chain=[[backend.pk, flow.pk, True, 1.0]],
            evidence={"intent": [n]},
        )
        for n in range(20)
    ]

    with django_assert_num_queries(3):  # backends, flows, intent rules
        names = names_for(rows)
    with django_assert_num_queries(0):
        assert {read(row, names).candidates[0]["flow"] for row in rows} == {"Reviewer"}

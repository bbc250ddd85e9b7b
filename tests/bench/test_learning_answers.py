"""bench/learning_answers.py: Flywheel's answers read as the learning simulator's figures."""

from __future__ import annotations

import json

from bench.learning_answers import (
    Answer,
    Routed,
    answer_of,
    assemble,
    kept_out,
    low_windows,
    routed,
    scaled_policy,
)
from bench.learning_scenarios import Profile, Scenario

PROFILES = {
    "fast": {"general": Profile(1.0, 0.1)},
    "slow": {"general": Profile(1.0, 1.0)},
    "flaky": {"general": Profile(0.5, 0.1)},
}
SCENARIO = Scenario("test", PROFILES, questions=10, intents=("general",))


def _answer(chain: list[tuple[str, bool]], candidates: list[str], cached: bool = False) -> bytes:
    return json.dumps(
        {
            "answer": "x",
            "routing": {
                "intent": "general",
                "candidates": [{"backend": name} for name in candidates],
                "fallback_chain": [{"backend": b, "ok": ok} for b, ok in chain],
                "cached": cached,
            },
        }
    ).encode()


def _question(n: int, start: float, candidates: set[str], sound: set[str]) -> Routed:
    return Routed(
        n,
        "general",
        start,
        frozenset({"fast"}),
        0.1,
        first="fast",
        end=start + 0.1,
        candidates=frozenset(candidates),
        sound=frozenset(sound),
    )


def test_an_answer_gives_its_first_attempt_failures_and_candidates() -> None:
    answer = answer_of(200, _answer([("flaky", False), ("fast", True)], ["flaky", "fast", "slow"]))

    assert answer == Answer(
        "general", (("flaky", False), ("fast", True)), frozenset({"flaky", "fast", "slow"})
    )
    assert answer.first == "flaky"


def test_a_failure_gives_the_chain_it_tried() -> None:
    chain = [{"backend": "flaky", "ok": False}]
    details = {"intent": "general", "fallback_chain": chain}
    body = json.dumps({"error": {"type": "AllBackendsFailed", "details": details}}).encode()

    answer = answer_of(502, body)

    assert (answer.intent, answer.first, answer.candidates) == ("general", "flaky", {"flaky"})


def test_a_question_is_scored_against_the_best_backend_for_its_intent() -> None:
    answer = answer_of(200, _answer([("flaky", False), ("fast", True)], ["flaky", "fast"]))

    question = routed(4, 1.0, 1.5, answer, PROFILES, cost=5.0)

    assert question is not None
    assert question.oracle == {"fast"}
    assert (question.first, question.failed, question.answered) == ("flaky", 1, True)
    assert question.sound == {"fast", "slow"}


def test_a_cached_stand_in_is_not_an_answer() -> None:
    answer = answer_of(200, _answer([("flaky", False)], ["flaky"], cached=True))

    question = routed(0, 0.0, 0.2, answer, PROFILES, cost=5.0)

    assert question is not None
    assert not question.answered


def test_a_question_routed_for_an_intent_no_backend_serves_is_left_out() -> None:
    answer = Answer("summarize", (), frozenset())

    assert routed(0, 0.0, 0.1, answer, PROFILES, cost=5.0) is None


def test_assembling_numbers_the_questions_without_gaps_and_moves_the_drifts() -> None:
    questions = [_question(n, float(n), {"fast"}, {"fast"}) for n in (5, 0, 2, 3)]

    run = assemble(SCENARIO, questions, [(3, 3.0, "a change")])

    assert [q.n for q in run.questions] == [0, 1, 2, 3]
    assert [q.start for q in run.questions] == [0.0, 2.0, 3.0, 5.0]
    assert run.drift_times == [(2, 3.0, "a change")]


def test_a_sound_backend_missing_from_the_candidates_counts_as_kept_out() -> None:
    both = {"fast", "slow"}
    questions = [
        _question(0, 0.0, both, both),
        _question(1, 1.0, {"slow"}, both),  # fast held out from 1.0...
        _question(2, 3.5, {"slow"}, both),
        _question(3, 4.0, both, both),  # ...to 4.0
    ]

    assert kept_out(questions) == {("fast", "general"): 3.0}


def test_a_backend_that_went_out_while_failing_is_not_counted_once_it_heals() -> None:
    """As the simulator: what counts is whether it failed the intent when it went out."""
    questions = [
        _question(0, 0.0, {"fast", "slow"}, {"slow"}),
        _question(1, 1.0, {"slow"}, {"slow"}),  # fast out while it fails...
        _question(2, 2.0, {"slow"}, {"fast", "slow"}),  # ...and still out once it heals
        _question(3, 3.0, {"fast", "slow"}, {"fast", "slow"}),
    ]

    assert kept_out(questions) == {}


def test_a_backend_not_yet_seen_among_the_candidates_is_not_kept_out() -> None:
    questions = [_question(0, 0.0, {"slow"}, {"fast", "slow"}), _question(1, 1.0, {"slow"}, set())]

    assert kept_out(questions) == {}


def test_windows_under_90_percent_after_the_first_300_aside_from_drifts() -> None:
    questions = [_question(n, float(n), {"fast"}, set()) for n in range(900)]
    # The first 300, a window at exactly 90 %, one under it, and the windows of a drift.
    for q in questions[0:50] + questions[350:360] + questions[420:431] + questions[650:700]:
        q.first = "slow"

    run = assemble(SCENARIO, questions, [(600, 600.0, "a change")])

    assert low_windows(run) == [(400, 0.89)]


def test_the_policys_seconds_scale_with_the_time_scale() -> None:
    values = scaled_policy(0.5)

    assert values["half_life_seconds"] == 20.0
    assert values["failure_cost_seconds"] == 2.5
    assert values["query_budget_seconds"] == 15.0
    assert values["latency_ceiling_ms"] == 2500
    assert values["cooldown_seconds"] == 30

"""Estimates with uncertainty: evidence discounted by age and newer attempts, changes
detected, attempts in flight counted, and the order by expected time to an answer."""

from __future__ import annotations

import math
import pickle
import random
from dataclasses import replace
from datetime import UTC, datetime

import pytest

from routing.selection.estimates import (
    Evidence,
    Prior,
    estimate,
    expected,
    folded,
    observation,
)
from routing.selection.learning import RETRY_SECONDS, Book, beliefs
from routing.selection.scoring import (
    BackendEntry,
    FlowEntry,
    HealthEntry,
    PolicyValues,
    score_candidates,
)

T0 = 1_800_000_000.0
HALF_LIFE, ATTEMPTS = 120.0, 50.0


def run(attempts: list[tuple[bool, float]], start: float = T0, gap: float = 0.1) -> Evidence:
    """Attempts (answered?, seconds) one every ``gap`` seconds, folded."""
    rows = [(start + i * gap, ok, s, None) for i, (ok, s) in enumerate(attempts)]
    return folded(rows, start + len(attempts) * gap, HALF_LIFE, ATTEMPTS)


def test_two_successes_do_not_beat_two_hundred() -> None:
    """The issue's lucky success: a backend tried twice, both fast answers, against one
    answering 98 % of 200 (a few failures included) a little slower."""
    lucky = estimate(run([(True, 0.05)] * 2), Prior())
    rng = random.Random(3)  # noqa: S311 - test data, nothing secret
    attempts = [(rng.random() < 0.98, 0.1) for _ in range(200)]
    steady = estimate(run(attempts), Prior())
    assert lucky.success_margin > 4 * steady.success_margin  # it knows how little it knows
    cost = PolicyValues().failure_cost_seconds
    assert steady.expected_seconds(cost) < lucky.expected_seconds(cost)


def test_a_flow_that_starts_failing_shows_within_a_few_answers() -> None:
    before = run([(True, 0.2)] * 300)
    e = before
    for i in range(6):
        e = e.then(observation(T0 + 31 + i * 0.1, False, 0.2), HALF_LIFE, ATTEMPTS)
    assert e.changes >= 1  # the short memory contradicted the long one
    assert estimate(e, Prior()).success < 0.5  # not 0.98, as 300 answers would say


def test_a_flow_that_turns_slow_shows_within_a_few_answers() -> None:
    e = run([(True, 0.1)] * 300)
    for i in range(3):
        e = e.then(observation(T0 + 31 + i, True, 2.0), HALF_LIFE, ATTEMPTS)
    assert estimate(e, Prior()).typical_seconds > 1.0


def test_steady_noise_is_not_taken_for_a_change() -> None:
    rng = random.Random(7)  # noqa: S311 - test data, nothing secret
    attempts = [(rng.random() < 0.97, 0.3 * math.exp(rng.gauss(0, 0.4))) for _ in range(2000)]
    assert run(attempts).changes <= 2  # a false alarm in a thousand attempts, at most


def test_evidence_fades_with_age() -> None:
    e = run([(True, 0.2)] * 100)
    later = e.discounted(e.at + HALF_LIFE, HALF_LIFE)
    assert later.weight == pytest.approx(e.weight / 2)
    assert estimate(later, Prior()).success_margin > estimate(e, Prior()).success_margin


def test_newer_attempts_discount_older_ones() -> None:
    assert run([(True, 0.2)] * 1000).weight < 2 * ATTEMPTS / math.log(2)


def test_attempts_hanging_in_flight_count_as_slow_already() -> None:
    e = run([(True, 0.1)] * 100)
    calm = estimate(e, Prior(), in_flight=[0.05, 0.12])
    hanging = estimate(e, Prior(), in_flight=[3.0, 3.1, 3.2, 3.3])
    assert calm.slow_in_flight == 0
    assert hanging.slow_in_flight == 4
    assert hanging.typical_seconds > 2.0 > 0.2 > calm.typical_seconds


def test_the_prior_comes_from_the_backends_other_intents_and_the_fleet() -> None:
    book = Book()
    failing = run([(False, 0.1)] * 20)
    published = {(1, "general"): {11: failing}, (2, "code-review"): {21: run([(True, 0.1)] * 20)}}
    known = beliefs(
        published,
        now=failing.at,
        half_life=HALF_LIFE,
        attempts_half_life=ATTEMPTS,
        default=Prior(),
        on=book,
    )
    prior, _ = known.prior(1, "code-review")
    assert prior.success < Prior().success  # its other intent fails; the fleet does well
    assert known.of(1, 12, "code-review").attempts == 0


def test_a_backend_that_changed_elsewhere_is_measured_again() -> None:
    """Its code answers went slow (a change); what it showed for general before that
    change is worth little now, so routing tries it again soon."""
    general = run([(True, 0.1)] * 100)
    code = run([(True, 0.1)] * 100, start=T0 + 20)
    for i in range(3):
        code = code.then(observation(T0 + 31 + i, True, 3.0), HALF_LIFE, ATTEMPTS)
    assert code.changed_at > general.newest
    published = {(1, "general"): {11: general}, (1, "code-review"): {12: code}}
    known = beliefs(
        published,
        now=code.at,
        half_life=HALF_LIFE,
        attempts_half_life=ATTEMPTS,
        default=Prior(),
        on=Book(),
    )
    assert known.of(1, 11, "general").attempts < general.discounted(code.at, HALF_LIFE).weight / 5


def _changed_on_code(general: Evidence) -> dict[tuple[int, str], dict[int, Evidence]]:
    """Backend 1's code answers turned slow at T0 + 31 (a change it showed); ``general``
    is its flow 11's evidence for general."""
    code = run([(True, 0.1)] * 100, start=T0 + 20)
    for i in range(3):
        code = code.then(observation(T0 + 31 + i, True, 3.0), HALF_LIFE, ATTEMPTS)
    return {(1, "general"): {11: general}, (1, "code-review"): {12: code}}


def test_a_backend_that_changed_elsewhere_is_tried_once_first_then_counts_what_it_shows() -> None:
    """A swap: backend 1 failed general questions until its change on code; since then
    it answers them. Its old failures must not outweigh what it shows after the change,
    or a backend that got better where routing passed it by is never followed. (Ten
    failures: too few for its own short memory to call five answers a change.)"""
    failing = run([(False, 0.1)] * 10)
    published = _changed_on_code(failing)
    book, now = Book(), T0 + 40

    def known() -> object:
        return beliefs(published, now=now, half_life=HALF_LIFE, attempts_half_life=ATTEMPTS,
                       default=Prior(), on=book)  # fmt: skip

    before = known().of(1, 11, "general")  # type: ignore[attr-defined]
    assert before.retry_due  # not tried since: one query tries it first
    for i in range(5):  # it is: it answers now
        book.observe((1, 11, "general"), now + i * 0.1, True, 0.1, None,
                     half_life=HALF_LIFE, attempts_half_life=ATTEMPTS)  # fmt: skip
    now += 1
    after = known().of(1, 11, "general")  # type: ignore[attr-defined]
    assert not after.retry_due  # measured again: no more trials
    # The failures before the change count a tenth: five answers since outweigh them.
    assert after.success > 0.7
    unchanged = folded(  # the same attempts, had the backend not changed
        [(now - 1 + i * 0.1, True, 0.1, None) for i in range(5)], now, HALF_LIFE, ATTEMPTS
    )
    assert estimate(failing.then(unchanged, HALF_LIFE, ATTEMPTS), Prior()).success < 0.5


def test_evidence_before_a_change_elsewhere_counts_a_tenth_once_newer_attempts_follow() -> None:
    old = run([(False, 0.1)] * 20)
    newer = observation(T0 + 10, True, 0.1)
    moved = old.then(newer, HALF_LIFE, ATTEMPTS, moved_at=T0 + 5)
    kept = old.then(newer, HALF_LIFE, ATTEMPTS)
    assert moved.failed == pytest.approx(kept.failed * 0.1)
    assert moved.answered == kept.answered == 1.0
    # A change before the evidence it follows says nothing of it.
    assert old.then(newer, HALF_LIFE, ATTEMPTS, moved_at=T0 - 1).failed == kept.failed


def test_the_book_adds_own_attempts_newer_than_the_published_evidence() -> None:
    book = Book()
    published = run([(True, 0.1)] * 50)
    key = (1, 11, "general")
    for i in range(5):
        book.observe(
            key, published.newest + 1 + i, False, 0.1, None,
            half_life=HALF_LIFE, attempts_half_life=ATTEMPTS,
        )  # fmt: skip
    now = published.newest + 6
    seen = book.evidence(key, published, now, HALF_LIFE, ATTEMPTS)
    assert seen.failed == pytest.approx(5, abs=0.5) or seen.changes
    assert seen.newest == published.newest + 5
    # Once stored, a publication folded after holds them: they are not counted twice.
    book.stored([(key, published.newest + 1 + i) for i in range(5)], now - 0.5)
    again = book.evidence(key, seen, now, HALF_LIFE, ATTEMPTS)
    assert again.weight == pytest.approx(seen.weight)


def test_another_process_publishing_newer_attempts_first_drops_none_of_this_ones() -> None:
    """Two web processes: this one's failures are not stored yet when the other's newer
    answers are published. This process still counts its failures (before, it dropped
    every own attempt older than the newest published one, stored or not)."""
    book = Book()
    key = (1, 11, "general")
    answers = run([(True, 0.1)] * 50)
    for i in range(3):  # this process's failures, its writer not done yet
        book.observe(key, answers.newest + 0.1 + i * 0.01, False, 0.1, None,
                     half_life=HALF_LIFE, attempts_half_life=ATTEMPTS)  # fmt: skip
    other = answers.then(observation(answers.newest + 0.5, True, 0.1), HALF_LIFE, ATTEMPTS)
    published = other.discounted(answers.newest + 0.6, HALF_LIFE)  # the other's, folded
    seen = book.evidence(key, published, answers.newest + 0.7, HALF_LIFE, ATTEMPTS)
    assert seen.failed > 2 or seen.changes  # its own three failures still count


def test_in_flight_attempts_are_forgotten_when_they_end() -> None:
    book = Book()
    key = (1, 11, "general")
    token = book.started(key, T0)
    assert book.running(key, T0 + 2) == [2]
    book.finished(key, token)
    assert book.running(key, T0 + 2) == []


def _flow(backend_id: int, intent: str) -> FlowEntry:
    return FlowEntry(backend_id * 10, backend_id, f"f{backend_id}", f"flow {backend_id}",
                     frozenset({intent}), 1)  # fmt: skip


def test_candidates_go_in_increasing_expected_time_to_an_answer() -> None:
    """Fast but failing a third of the time, against slow and sure: at the default
    failure cost (5 s), the sure one first; with failures costing nothing, the fast."""
    fast = BackendEntry(1, "fast", "flowise", flows=(_flow(1, "general"),))
    sure = BackendEntry(2, "sure", "flowise", flows=(_flow(2, "general"),))
    rng = random.Random(1)  # noqa: S311 - test data, nothing secret
    evidence = {
        1: run([(rng.random() < 0.67, 0.05) for _ in range(200)]),
        2: run([(True, 1.5)] * 200),
    }
    now = datetime.fromtimestamp(T0, UTC)

    def order(policy: PolicyValues) -> list[str]:
        ranked = score_candidates(
            [fast, sure],
            intent="general",
            health={1: HealthEntry(True), 2: HealthEntry(True)},
            estimate_of=lambda b, f: estimate(evidence[b.id], Prior()),
            policy=policy,
            now=now,
        )
        return [c.backend.name for c in ranked]

    assert order(PolicyValues()) == ["sure", "fast"]
    assert order(PolicyValues(failure_cost_seconds=0.0)) == ["fast", "sure"]


def test_expected_time_counts_what_a_failure_costs() -> None:
    assert expected(1.0, 0.5, 0.1, 5.0) == 0.5
    assert expected(0.5, 0.5, 0.1, 5.0) == pytest.approx(0.5 + 1 * (0.1 + 5.0))


def test_a_flow_that_only_failed_is_tried_once_more_after_a_while() -> None:
    """Against a rival that always answers at once, a flow that only failed would wait for
    its failures to fade entirely; RETRY_SECONDS after its last attempt it goes first
    once, as a breaker's trial would, and its answer or failure is measured."""
    failing = run([(False, 0.05)] * 15)
    published = {(1, "general"): {11: failing}, (2, "general"): {21: run([(True, 0.01)] * 50)}}
    flows = {1: _flow(1, "general"), 2: _flow(2, "general")}
    backends = [BackendEntry(b, f"b{b}", "flowise", flows=(flows[b],)) for b in (1, 2)]

    def first(after: float) -> tuple[str, bool]:
        now = failing.newest + after
        known = beliefs(published, now=now, half_life=HALF_LIFE, attempts_half_life=ATTEMPTS,
                        default=Prior(), on=Book())  # fmt: skip
        ranked = score_candidates(
            backends,
            intent="general",
            health={1: HealthEntry(True), 2: HealthEntry(True)},
            estimate_of=lambda b, f: known.of(b.id, {1: 11, 2: 21}[b.id], "general"),
            policy=PolicyValues(),
            now=datetime.fromtimestamp(now, UTC),
            rng=random.Random(5),  # noqa: S311 - a test's draws
            trial=lambda scope: True,  # a real query
        )
        return ranked[0].backend.name, ranked[0].trial

    assert first(RETRY_SECONDS - 1) == ("b2", False)
    assert first(RETRY_SECONDS) == ("b1", True)


def test_a_flow_that_answered_for_long_then_failed_a_few_times_is_tried_once_more() -> None:
    """A backend that always answered fails three questions in a row (all that were in
    flight when it broke), and routing passes it by. Its short memory still holds some
    of the answers before, but what counts since the change it showed is failures: it
    is failing, and RETRY_SECONDS later it is tried once more (before, never: its three
    failures put it far behind a rival that answers at once, for good)."""
    answers = [(T0 + i * 0.01, True, 0.002, None) for i in range(500)]
    failures = [(T0 + 5 + i * 0.001, False, 0.003, None) for i in range(3)]
    broke = folded(answers + failures, T0 + 5.01, HALF_LIFE, ATTEMPTS)
    assert broke.changes == 1
    assert broke.recent.answered > broke.recent.failed
    known = beliefs({(1, "general"): {11: broke}}, now=broke.newest + RETRY_SECONDS,
                    half_life=HALF_LIFE, attempts_half_life=ATTEMPTS, default=Prior(),
                    on=Book())  # fmt: skip
    assert known.of(1, 11, "general").retry_due


def test_a_flow_that_answered_a_while_then_failed_three_in_a_row_is_tried_once_more() -> None:
    """The chaos suite's healed primary: thirty answers, then the three questions it had
    in flight fail at once. Too few answers for its short memory to call that a change,
    and it still holds more answers than failures; Thompson draws from a flow that far
    behind a rival answering at once almost never dare it, so it was locked out for good
    once it healed. Two failures in a row or more, the last of its attempts: RETRY_SECONDS
    later it goes first once, as a breaker's trial would."""
    answers = [(T0 + i * 0.1, True, 0.004, None) for i in range(30)]
    failures = [(T0 + 3.5 + i * 0.001, False, 0.003, None) for i in range(3)]
    broke = folded(answers + failures, T0 + 3.51, HALF_LIFE, ATTEMPTS)
    assert broke.changes == 0  # what made the retry due before: none of it
    assert broke.recent.answered > broke.recent.failed
    rival = run([(True, 0.038)] * 200, start=T0 - 16)
    published = {(1, "general"): {11: broke}, (2, "general"): {21: rival}}
    flows = {1: _flow(1, "general"), 2: _flow(2, "general")}
    backends = [BackendEntry(b, f"b{b}", "flowise", flows=(flows[b],)) for b in (1, 2)]

    def first(after: float, seed: int) -> tuple[str, bool]:
        now = broke.newest + after
        known = beliefs(published, now=now, half_life=HALF_LIFE, attempts_half_life=ATTEMPTS,
                        default=Prior(), on=Book())  # fmt: skip
        ranked = score_candidates(
            backends,
            intent="general",
            health={1: HealthEntry(True), 2: HealthEntry(True)},
            estimate_of=lambda b, f: known.of(b.id, {1: 11, 2: 21}[b.id], "general"),
            policy=PolicyValues(),
            now=datetime.fromtimestamp(now, UTC),
            rng=random.Random(seed),  # noqa: S311 - a test's draws
            trial=lambda scope: True,  # a real query
        )
        return ranked[0].backend.name, ranked[0].trial

    assert first(RETRY_SECONDS - 1, seed=5) == ("b2", False)
    assert all(first(RETRY_SECONDS, seed) == ("b1", True) for seed in range(20))
    # Answered once more, it is no longer failing: no more trials.
    healed = broke.then(observation(broke.newest + RETRY_SECONDS, True, 0.004), HALF_LIFE,
                        ATTEMPTS)  # fmt: skip
    known = beliefs({(1, "general"): {11: healed}}, now=healed.newest + 2 * RETRY_SECONDS,
                    half_life=HALF_LIFE, attempts_half_life=ATTEMPTS, default=Prior(),
                    on=Book())  # fmt: skip
    assert not known.of(1, 11, "general").retry_due


def test_one_failure_after_answers_makes_no_retry_due() -> None:
    """A flow that answers and failed once, its last attempt, is not failing: the draws
    alone decide when it is tried again."""
    answers = [(T0 + i * 0.1, True, 0.004, None) for i in range(30)]
    once = folded([*answers, (T0 + 3.5, False, 0.003, None)], T0 + 3.51, HALF_LIFE, ATTEMPTS)
    known = beliefs({(1, "general"): {11: once}}, now=once.newest + 2 * RETRY_SECONDS,
                    half_life=HALF_LIFE, attempts_half_life=ATTEMPTS, default=Prior(),
                    on=Book())  # fmt: skip
    assert not known.of(1, 11, "general").retry_due


def test_the_streak_counts_the_newest_failures_in_a_row_and_an_answer_ends_it() -> None:
    assert run([(True, 0.1)] * 5 + [(False, 0.1)] * 3).streak == 3
    assert run([(False, 0.1)] * 3 + [(True, 0.1)]).streak == 0
    # Folded in parts: newer failures alone extend the streak, an answer among them ends it.
    failing = run([(True, 0.1), (False, 0.1)])
    assert failing.then(run([(False, 0.1)] * 2, start=T0 + 1), HALF_LIFE, ATTEMPTS).streak == 3
    mixed = run([(False, 0.1), (True, 0.1), (False, 0.1)], start=T0 + 1)
    assert failing.then(mixed, HALF_LIFE, ATTEMPTS).streak == 1
    # This process's own failures, after the published evidence.
    book, key = Book(), (1, 11, "general")
    for i in range(2):
        book.observe(key, failing.newest + 1 + i, False, 0.1, None,
                     half_life=HALF_LIFE, attempts_half_life=ATTEMPTS)  # fmt: skip
    assert book.evidence(key, failing, failing.newest + 3, HALF_LIFE, ATTEMPTS).streak == 3


def test_evidence_published_before_the_streak_was_kept_still_loads() -> None:
    """The cache pickles the published evidence; one pickled before the field existed
    loads with no streak."""
    broke = run([(True, 0.1)] * 30 + [(False, 0.1)] * 3)
    assert pickle.loads(pickle.dumps(broke)) == broke  # noqa: S301 - our own bytes
    old = replace(broke)
    del old.__dict__["streak"]  # as the class without it pickled its instances
    loaded = pickle.loads(pickle.dumps(old))  # noqa: S301 - our own bytes
    assert loaded.streak == 0
    assert loaded.then(observation(T0 + 5, False, 0.1), HALF_LIFE, ATTEMPTS).streak == 1


def test_a_retry_that_fails_again_opens_no_breaker() -> None:
    """Trying once more a flow routing knows to fail, and seeing it fail, tells the
    breakers nothing new: its failures do not count toward opening the backend."""
    from routing.selection.attempt import Attempt
    from routing.selection.breaker import Windows

    windows = Windows()
    for flow_id in (11, 12, 11, 12, 11, 12):
        change = windows.note(
            Attempt(1, "b1", flow_id, "f", False, 50.0, "UnexpectedError", retried=True),
            "general" if flow_id == 11 else "code-review",
            tenant_id=1,
            shared=False,
            probe_failed=False,
            on_trial=lambda scope: False,
        )
        assert change is None
    assert not windows.backends
    assert not windows.flows

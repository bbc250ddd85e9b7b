"""A short memory of the last few attempts says a flow changed when what it holds is
unlikely under the long memory: failures far more often, or answers far slower."""

from __future__ import annotations

import math

from routing.selection.memory import RECENT_HALF_LIFE, Sums, changed


def _answers(n: float, seconds: float) -> Sums:
    log = math.log(seconds)
    return Sums(answered=n, log_seconds=n * log, log_squares=n * log * log)


def _with_spread(n: int, seconds: float) -> Sums:
    """``n`` answers around ``seconds``, half 10 % faster and half 10 % slower."""
    total = Sums()
    for i in range(n):
        total = total.plus(_answers(1, seconds * (1.1 if i % 2 else 0.9)))
    return total


def test_failures_far_more_often_than_before_are_a_change() -> None:
    before = _answers(40, 0.2)
    recent = Sums(failed=3.0)
    assert changed(before.plus(recent), recent)


def test_answers_far_slower_than_before_are_a_change() -> None:
    before = _with_spread(40, 0.2)
    recent = _answers(3, 2.0)
    assert changed(before.plus(recent), recent)


def test_answers_like_before_are_no_change() -> None:
    before = _with_spread(40, 0.2)
    recent = _with_spread(4, 0.2)
    assert not changed(before.plus(recent), recent)


def test_too_little_known_before_to_tell() -> None:
    """Under three short memories of evidence before the recent attempts: no judgement."""
    before = _answers(3 * RECENT_HALF_LIFE - 1, 0.2)
    recent = Sums(failed=3.0)
    assert not changed(before.plus(recent), recent)

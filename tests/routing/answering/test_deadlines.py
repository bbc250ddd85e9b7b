"""An attempt's deadline: its backend's timeout, within the budget, leaving the rest time."""

from __future__ import annotations

import pytest

from routing.answering.deadlines import FALLBACK_SHARE, attempt_deadline, cut_short


@pytest.mark.parametrize(
    ("timeout", "budget", "waits", "seconds"),
    [
        (60.0, 30.0, True, 30.0 * (1 - FALLBACK_SHARE)),  # half the budget left to the rest
        (60.0, 30.0, False, 30.0),  # the last candidate may take all that remains
        (5.0, 30.0, True, 5.0),  # a backend's own timeout, when it is shorter
        (60.0, None, True, 60.0),  # no budget: the backend's timeout
    ],
)
def test_an_attempt_gets_its_timeout_within_the_budget_less_the_fallbacks_share(
    timeout: float, budget: float | None, waits: bool, seconds: float
) -> None:
    assert attempt_deadline(timeout, budget, waits) == seconds


def test_a_cut_by_the_attempts_deadline_is_the_backends_and_by_the_budget_is_not() -> None:
    own = cut_short("fw", 15.0, 30.0)
    budget = cut_short("fw", 30.0, 30.0)

    assert (own.type, own.backend) == ("TimeoutError", "fw")
    assert "attempt's deadline (15.0 s)" in own.message
    assert budget.type == "BudgetExceeded"
    assert "time budget (30.0 s)" in budget.message

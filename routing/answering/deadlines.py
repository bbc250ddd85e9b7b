"""How long an attempt at a backend may take: a deadline, not an idle timer.

The query has a time budget (the policy's ``query_budget_seconds``). Each attempt
gets its backend's timeout as a deadline for the whole answer, within what remains
of that budget, and leaves FALLBACK_SHARE of it to the candidates behind it; so a
backend that sends a byte now and then (whose idle timer never fires) is cut while
there is still time for the next one. An attempt cut by its own deadline is the
backend's failure, measured as one (its breaker and its estimates see it); one cut
by the query's budget is not (it may have had only milliseconds).
"""

from __future__ import annotations

import time

from backends.errors import BackendTimeoutError
from routing.selection.attempt import BudgetExceededError

# What an attempt with candidates waiting behind it leaves them of the query's budget.
FALLBACK_SHARE = 0.5


def remaining(deadline: float | None) -> float | None:
    """Seconds left before ``deadline`` (a time.perf_counter() value); None: no deadline."""
    return None if deadline is None else deadline - time.perf_counter()


def attempt_deadline(timeout: float, budget: float | None, fallback_waits: bool) -> float:
    """The seconds one attempt may take in all: its backend's ``timeout``, within what
    remains of the query's ``budget``, leaving FALLBACK_SHARE of that to the candidates
    behind it when ``fallback_waits``."""
    if budget is None:
        return timeout
    return min(timeout, budget * (1 - FALLBACK_SHARE) if fallback_waits else budget)


def cut_short(backend: str, seconds: float | None, budget: float | None) -> BackendTimeoutError:
    """The error of an attempt its timer ended after ``seconds``: the query's budget ran
    out (``seconds`` reached ``budget``: BudgetExceeded, not measured), or the attempt's
    own deadline passed (a TimeoutError, the backend's)."""
    if seconds is None or (budget is not None and seconds >= budget):
        return BudgetExceededError(
            f"No answer within what remained of the query's time budget ({budget or 0:.1f} s).",
            backend=backend,
        )
    return BackendTimeoutError(
        f"No whole answer within the attempt's deadline ({seconds:.1f} s).", backend=backend
    )

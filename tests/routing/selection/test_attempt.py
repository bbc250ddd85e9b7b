"""Whose fault a failed attempt was: the caller's request, or the backend."""

from __future__ import annotations

import pytest

from backends.errors import (
    BackendAuthenticationError,
    BackendConnectionError,
    BackendError,
    BackendNotFoundError,
    BackendRateLimitError,
    BackendUnexpectedError,
    BackendValidationError,
)
from routing.selection.attempt import BudgetExceededError, caller_caused


@pytest.mark.parametrize(
    "error",
    [
        BackendUnexpectedError("a body over its limit", http_status=413),
        BackendValidationError("bad input", http_status=400),
        BackendValidationError("does not validate", http_status=422),
        BackendUnexpectedError("URI too long", http_status=414),
    ],
)
def test_a_refusal_of_what_was_sent_is_the_callers_doing(error: BackendError) -> None:
    assert caller_caused(error)


@pytest.mark.parametrize(
    "error",
    [
        BackendAuthenticationError("Flywheel's key refused", http_status=401),
        BackendAuthenticationError("Flywheel's key refused", http_status=403),
        BackendNotFoundError("no such flow", http_status=404),
        BackendUnexpectedError("request timeout", http_status=408),
        BackendRateLimitError("slow down", http_status=429),
        BackendUnexpectedError("boom", http_status=500),
        BackendValidationError("Flow has no data", http_status=500),  # the flow's, not the input
        BackendUnexpectedError("sent more than Flywheel reads", details={"failure": "too_large"}),
        BackendConnectionError("refused"),
        BudgetExceededError("the query's budget ran out"),
    ],
)
def test_every_other_failure_is_the_backends(error: BackendError) -> None:
    assert not caller_caused(error)

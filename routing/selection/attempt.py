"""One attempt along the fallback chain, as selection learns from it and recording keeps it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from backends.errors import BackendError, BackendTimeoutError

# A backend's 4xx answers that say nothing of what it was sent: Flywheel's key refused
# (401, 403), a flow it does not have (404), its own clock or pace (408, 429).
NOT_THE_REQUEST = frozenset({401, 403, 404, 408, 429})


CANCELLED = "Cancelled"  # a hedged attempt stopped because the other one answered first


class BudgetExceededError(BackendTimeoutError):
    """An attempt cut short because the query's time budget ran out (not the backend's
    own timeout)."""

    type = "BudgetExceeded"


def caller_caused(error: BackendError) -> bool:
    """Whether a backend refused what this query sent it (the question, the history
    that travelled with it, its parameters) rather than failed: any 4xx but
    NOT_THE_REQUEST, such as 400, 413 (a body over its limit) or 422. The backend
    answered, so the failure says nothing of its health (routing.selection.breaker)."""
    status = error.http_status
    return status is not None and 400 <= status < 500 and status not in NOT_THE_REQUEST


@dataclass(frozen=True)
class Attempt:
    backend_id: int
    backend: str
    flow_id: int
    flow: str
    ok: bool
    latency_ms: float
    error_type: str = ""
    error: str = ""
    # Token usage and cost, where the backend reported them (None: it did not).
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    total_tokens: int | None = None
    cost: float | None = None
    # The tenant that owns the backend (None: a shared one), so that /metrics keeps a
    # tenant's backend apart from a shared one of the same name.
    backend_owner: int | None = None
    caller_fault: bool = False  # failed by caller_caused: no count against the backend
    retried: bool = False  # a flow that only failed, tried once more (learning.RETRY_SECONDS)
    hedged: bool = False  # started while the attempt before it was still running (hedging)
    # When it ended, in seconds since the epoch by this process's clock (0: not known): its
    # performance record's time, so what every process learned and what this one saw
    # itself line up however late the record is written and whatever the database's clock.
    ended_at: float = 0.0

    @property
    def measured(self) -> bool:
        """Whether it says something of the backend (a performance record): an attempt
        cut short by the query's budget may have had only milliseconds, and one the
        backend refused for what the caller sent says nothing of its health (one tenant
        must not lower a shared backend's score for all). Nor does a hedged attempt
        cancelled because the other answered first: it had not failed."""
        return (
            self.error_type not in (BudgetExceededError.type, CANCELLED) and not self.caller_fault
        )

    def as_dict(self) -> dict[str, Any]:
        found: dict[str, Any] = {
            "backend": self.backend,
            "flow": self.flow,
            "ok": self.ok,
            "latency_ms": self.latency_ms,
            "error_type": self.error_type,
            "error": self.error,
        }
        if self.hedged:  # only then: most rows never are
            found["hedged"] = True
        return found

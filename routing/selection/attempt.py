"""One attempt along the fallback chain, as selection learns from it and recording keeps it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from backends.errors import BackendTimeoutError


class BudgetExceededError(BackendTimeoutError):
    """An attempt cut short because the query's time budget ran out (not the backend's
    own timeout)."""

    type = "BudgetExceeded"


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

    @property
    def measured(self) -> bool:
        """Whether it says something of the backend (a performance record): an attempt
        cut short by the query's budget may have had only milliseconds."""
        return self.error_type != BudgetExceededError.type

    def as_dict(self) -> dict[str, Any]:
        return {
            "backend": self.backend,
            "flow": self.flow,
            "ok": self.ok,
            "latency_ms": self.latency_ms,
            "error_type": self.error_type,
            "error": self.error,
        }

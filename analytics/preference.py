"""Which backend routing prefers now for an intent, and why, in words a person reads.

The estimates are routing's own (routing.selection.planning.preferences over the
current routing state), so the analytics page says what the next query would do,
and how often routing still tries the others to keep their measure fresh.
"""

from __future__ import annotations

from typing import Any

from routing.selection.planning import preferences
from routing.selection.scoring import Candidate
from routing.selection.state import now, routing_state
from routing.selection.words import first_shares, why


def _entry(c: Candidate) -> dict[str, Any]:
    return {**c.as_dict(), "recent_attempts": round(c.estimate.attempts, 1)}


def preferred(*, tenant_id: int | None, intent: str) -> dict[str, Any]:
    """``{"backend", "flow", "score", ..., "why", "candidates"}`` for the backend routing
    would try first for ``intent`` now; ``backend`` is None (and ``why`` says so) when
    none could serve it."""
    state = routing_state()
    ranked = preferences(state, tenant_id=tenant_id, intent=intent, now=now())
    if not ranked:
        return {
            "backend": None,
            "flow": None,
            "why": "No backend could serve it now: no flow matches the intent (and no "
            "generic flow), or every backend that has one is in cooldown.",
            "candidates": [],
        }
    policy = state.policy
    shares = first_shares(ranked, policy.failure_cost_seconds, policy.exploration)
    entries = [_entry(c) for c in ranked]
    said = why(entries, shares=shares, intent=intent)
    named = f"{entries[0]['backend']} / {entries[0]['flow']}: "
    return {
        **entries[0],
        "why": said,
        # The same without the backend and flow it begins with, for a line naming them.
        "reason": said.removeprefix(named),
        "candidates": entries,
    }

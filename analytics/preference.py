"""Which backend routing prefers now for an intent, and why, in words a person reads.

The scores are routing's own (routing.selection.planning.preferences over the current
routing state), so the analytics page says what the next query would do.
"""

from __future__ import annotations

from typing import Any

from routing.selection.planning import Preference, preferences
from routing.selection.state import now, routing_state


def _history(preference: Preference) -> str:
    history = preference.history
    if history is None or not history.attempts:
        return "no recent attempts (performance counts as 0.5)"
    return (
        f"{round(history.success_rate * history.attempts)}/{history.attempts} recent attempts "
        f"succeeded, {history.avg_latency_ms:.0f} ms mean"
    )


def _why(best: Preference, runner_up: Preference | None) -> str:
    c = best.candidate
    parts = [
        f"score {c.score:.2f}",
        f"match {c.match:.2f}" + (" (generic flow)" if c.generic else ""),
        "healthy" if c.health else "not healthy",
        f"performance {c.performance:.2f}: {_history(best)}",
    ]
    why = "; ".join(parts)
    if runner_up is not None:
        other = runner_up.candidate
        why += f". Next: {other.backend.name} at {other.score:.2f}"
    return why + "."


def _entry(preference: Preference) -> dict[str, Any]:
    c = preference.candidate
    history = preference.history
    return {
        "backend": c.backend.name,
        "flow": c.flow.name,
        "score": c.score,
        "match": c.match,
        "health": c.health,
        "performance": c.performance,
        "tokens": c.tokens,
        "generic": c.generic,
        "recent_attempts": history.attempts if history else 0,
    }


def preferred(*, tenant_id: int | None, intent: str) -> dict[str, Any]:
    """``{"backend", "flow", "score", ..., "why", "candidates"}`` for the backend routing
    would try first for ``intent`` now; ``backend`` is None (and ``why`` says so) when
    none could serve it."""
    ranked = preferences(routing_state(), tenant_id=tenant_id, intent=intent, now=now())
    if not ranked:
        return {
            "backend": None,
            "flow": None,
            "why": "No backend could serve it now: no flow matches the intent (and no "
            "generic flow), or every backend that has one is in cooldown.",
            "candidates": [],
        }
    return {
        **_entry(ranked[0]),
        "why": _why(ranked[0], ranked[1] if len(ranked) > 1 else None),
        "candidates": [_entry(p) for p in ranked],
    }

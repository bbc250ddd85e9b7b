"""How much a flow's scope counts for a question, by the query type's weights (seed 004).

A question's ``global_weight`` (query routing on; its ``local_weight`` is 1 - it) says
how far it leans towards corpus-wide understanding. A flow made for the breadth it
leans to gets a little more match and a shorter expected time, one made for the other
a little less and a longer one, linearly in the lean: nothing at 0.5 (a 50/50 HYBRID
question), the full nudge at 1 or 0, nothing for a flow of any scope.
"""

from __future__ import annotations

from typing import Protocol

SCOPE_FIT_BONUS = 0.1
SCOPE_MISFIT_FACTOR = 0.8
SCOPE_FIT_TIME = 0.8  # a flow of the question's breadth (weight 1): expected sooner
SCOPE_MISFIT_TIME = 1.25


class Scoped(Protocol):
    @property
    def scope(self) -> str:
        """global, local or any."""
        ...


def scope_lean(flow: Scoped, global_weight: float | None) -> float:
    """How far a question leans towards the flow's scope, from -1 (wholly the other) to 1
    (wholly its own): 2 * the weight of its scope - 1, where a global flow's is
    ``global_weight`` and a local one's 1 - it. 0 for "any", and with no query type."""
    if global_weight is None or flow.scope not in {"global", "local"}:
        return 0.0
    weight = global_weight if flow.scope == "global" else 1.0 - global_weight
    return max(-1.0, min(1.0, 2.0 * weight - 1.0))


def scope_fit(flow: Scoped, global_weight: float | None) -> float:
    """What a flow's scope makes of its expected time, for a question of that global
    weight (query routing on): interpolated linearly by scope_lean, from 1 (no change:
    weight 0.5, a flow of any scope, no query type) to SCOPE_FIT_TIME (sooner) when the
    weight of the flow's scope is 1, and to SCOPE_MISFIT_TIME (later) when it is 0."""
    lean = scope_lean(flow, global_weight)
    full = SCOPE_FIT_TIME if lean > 0 else SCOPE_MISFIT_TIME
    return 1 - abs(lean) + abs(lean) * full  # exactly ``full`` at a lean of +-1


def scope_adjusted(score: float, flow: Scoped, global_weight: float | None) -> float:
    """A flow's match ``score`` nudged by its scope, interpolated linearly by scope_lean:
    unchanged at weight 0.5 (and for a flow of any scope, or no query type), up to
    ``score`` + SCOPE_FIT_BONUS (at most 1) when the weight of the flow's scope is 1, down
    to ``score`` * SCOPE_MISFIT_FACTOR when it is 0. A flow not matching stays 0."""
    lean = scope_lean(flow, global_weight)
    if not score or not lean:
        return score
    full = min(1.0, score + SCOPE_FIT_BONUS) if lean > 0 else score * SCOPE_MISFIT_FACTOR
    return (1 - abs(lean)) * score + abs(lean) * full

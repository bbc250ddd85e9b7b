"""A/B splits: which arm answers a question first, in proportion to the arms' weights.

An admin sets a split per intent (routing.models.Split): arms that each name a
backend, or one of its flows, with a weight. A real query of that intent goes
first to one arm, drawn among the arms able to answer at that moment (a backend
down, in cooldown, or whose flow's breaker is open gives its share to the
others); the candidates routing ranked follow as the fallback. Dry runs and
the analytics page show routing's own order.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import replace

from routing.selection.scoring import Arm, Candidate

# The candidate an arm stands for, if it can answer now (None: it cannot).
ArmCandidate = Callable[[Arm], Candidate | None]


def drawn_arm(arms: Sequence[Arm], rng: random.Random) -> Arm:
    """One arm, each with the chance of its weight over the arms' total."""
    point = rng.uniform(0, sum(a.weight for a in arms))
    for arm in arms:
        point -= arm.weight
        if point < 0:
            return arm
    return arms[-1]  # the float sum's last step


def split_first(
    candidates: Sequence[Candidate],
    arms: Sequence[Arm],
    candidate_of: ArmCandidate,
    rng: random.Random,
) -> list[Candidate]:
    """``candidates`` with one arm's candidate first (its ``arm`` set), unless no arm
    can answer or a breaker's trial goes first (the trial is what closes a breaker)."""
    if not arms or (candidates and candidates[0].trial):
        return list(candidates)
    able = [(arm, c) for arm in arms if (c := candidate_of(arm)) is not None]
    if not able:
        return list(candidates)
    arm = drawn_arm([a for a, _ in able], rng)
    first = next(c for a, c in able if a is arm)
    rest = [c for c in candidates if (c.backend.id, c.flow.id) != (first.backend.id, first.flow.id)]
    return [replace(first, arm=arm.label, explored=False), *rest]

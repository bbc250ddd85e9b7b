"""Why routing ranked the candidates as it did, in words a person reads.

From the candidates as a decision records them (Candidate.as_dict), so the
trace page of an old decision, ``route --json`` and the analytics page say it
the same way: "B2 / Creative Coach: 97 % of 140 recent attempts answered
(±3 %), 0.8 s typical; B1 / Fast: 60 % of 35 (±16 %), 50 ms; chosen for the
expected 0.83 s to an answer."
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from typing import Any

from routing.selection.scoring import Candidate

SHARE_DRAWS = 400  # draws that estimate how often each candidate comes first


def _seconds(seconds: float) -> str:
    if seconds < 1:
        return f"{seconds * 1000:.0f} ms"
    return f"{seconds:.1f} s" if seconds < 10 else f"{seconds:.0f} s"


def _percent(share: float) -> str:
    return f"{share * 100:.0f} %"


def described(c: Mapping[str, Any], *, first: bool = False) -> str:
    """One candidate's standing: its chance of success and typical time, and how sure."""
    name = f"{c['backend']} / {c['flow']}"
    if "success" not in c:  # recorded before routing learned with uncertainty
        return f"{name}: score {c['score']:.2f}"
    attempts = round(c["attempts"])
    margin = f"±{c['success_margin'] * 100:.0f} %"
    typical = _seconds(c["typical_ms"] / 1000)
    if attempts < 1:
        return (
            f"{name}: no recent attempts; judged by its prior (its backend's other intents "
            f"and the fleet): {_percent(c['success'])} ({margin}), {typical} typical"
        )
    answered = "recent attempts answered " if first else ""
    return (
        f"{name}: {_percent(c['success'])} of {attempts} {answered}({margin}), "
        f"{typical}{' typical' if first else ''}"
    )


def why(
    candidates: Sequence[Mapping[str, Any]],
    *,
    explored: bool = False,
    shares: Mapping[str, float] | None = None,
    intent: str = "",
) -> str:
    """Why the first candidate came first, with the others' standing after it."""
    if not candidates:
        return "No candidate: no flow serves the intent, or every backend is in cooldown."
    first = candidates[0]
    parts = [described(first, first=True), *(described(c) for c in candidates[1:])]
    text = "; ".join(parts)
    if "expected_seconds" in first:
        expected = _seconds(first["expected_seconds"])
        if first.get("arm"):
            split = f"the A/B split of {intent} questions" if intent else "the A/B split"
            text += (
                f". Tried first as arm {first['arm']} of {split} (its expected time to an "
                f"answer is {expected}); routing's own order follows"
            )
        elif explored:
            text += (
                f". Tried first to measure it again (a draw from what routing believes), "
                f"though its expected time to an answer is {expected}"
            )
        elif first.get("generic"):
            text += f". A generic flow: no flow made for the intent could serve; {expected}"
        else:
            text += f"; chosen for the expected {expected} to an answer"
    if shares:
        kind = f"{intent} questions" if intent else "questions"
        others = [
            f"{_percent(share)} of {kind} still go to {name} to keep its measure fresh"
            for name, share in shares.items()
            if name != first["backend"] and share >= 0.005
        ]
        if others:
            text += "; " + ", ".join(others)
    return text + "."


def first_shares(
    candidates: Sequence[Candidate], failure_cost: float, exploration: float, *, seed: int = 0
) -> dict[str, float]:
    """How often each candidate's backend comes first under Thompson sampling (estimated
    from SHARE_DRAWS draws; for pages, never on the query path)."""
    rivals = [c for c in candidates if not c.generic and c.health >= 1.0 and not c.trial]
    if len(rivals) < 2 or not exploration:
        return {}
    rng = random.Random(seed)  # noqa: S311 - a page's estimate, nothing secret
    wins: dict[str, int] = {}
    for _ in range(SHARE_DRAWS):
        best = min(rivals, key=lambda c: c.estimate.sampled_seconds(failure_cost, rng, exploration))
        wins[best.backend.name] = wins.get(best.backend.name, 0) + 1
    return {name: count / SHARE_DRAWS for name, count in wins.items()}

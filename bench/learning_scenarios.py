"""Scenarios for bench/learning.py: made-up backends with hidden profiles per intent.

A profile says, for one backend and one intent, how often it answers, how long
an answer takes (log-normal around a median) and how long a failure takes. A
scenario lists the backends' profiles and the changes that happen on the way
(at a question number). The named scenarios, and the drawn ones of SEEN_SEEDS, are
the ones routing's defaults were tuned on; ``held_out`` draws scenarios at random
from seeds that were never used for tuning (HELD_OUT_SEEDS), for the figures the
README quotes.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field, replace

INTENTS = ("creative-orientation", "technical-analysis", "document-qa", "code-review", "general")
# Drawn scenarios routing was tuned on: held out until the change-detection work
# looked at them, so they tune now and no longer measure.
SEEN_SEEDS = (7101, 7102, 7103, 7104)
HELD_OUT_SEEDS = (7201, 7202, 7203, 7204)


@dataclass(frozen=True)
class Profile:
    success: float  # chance an attempt answers
    median: float  # seconds an answer takes (median)
    spread: float = 0.3  # sigma of ln(seconds)
    fail_seconds: float = 0.05  # what a failure takes (a timeout: the backend's timeout)


Profiles = dict[str, dict[str, Profile]]  # backend -> intent -> profile


@dataclass(frozen=True)
class Change:
    at: int  # the question number from which it holds
    backends: Profiles  # the backends whose profiles change (a new name: it joins)
    label: str = ""


@dataclass(frozen=True)
class Scenario:
    name: str
    backends: Profiles
    questions: int = 1500
    in_flight: int = 8
    changes: tuple[Change, ...] = field(default_factory=tuple)
    intents: tuple[str, ...] = INTENTS


def _same(profile: Profile, intents: tuple[str, ...] = INTENTS) -> dict[str, Profile]:
    return dict.fromkeys(intents, profile)


def _issue() -> Scenario:
    """The issue's scenario: B1 fast and reliable for code but failing 40 % of creative
    questions; B2 slow but never failing; B3 mediocre, failing every document question.
    After 1,500 questions B1 and B2 swap profiles."""
    b1 = {
        **_same(Profile(0.97, 0.15)),
        "code-review": Profile(1.0, 0.08),
        "creative-orientation": Profile(0.6, 0.1),
    }
    b2 = _same(Profile(1.0, 0.9))
    b3 = {**_same(Profile(0.9, 0.6)), "document-qa": Profile(0.0, 0.2, fail_seconds=0.2)}
    return Scenario(
        "issue",
        {"B1": b1, "B2": b2, "B3": b3},
        questions=3000,
        changes=(Change(1500, {"B1": b2, "B2": b1}, "B1 and B2 swap"),),
    )


def _stationary() -> Scenario:
    return Scenario(
        "stationary",
        {
            "B1": {**_same(Profile(0.99, 0.3)), "general": Profile(0.99, 0.1)},
            "B2": {**_same(Profile(0.95, 0.2)), "document-qa": Profile(1.0, 0.25)},
            "B3": {**_same(Profile(0.9, 0.6)), "technical-analysis": Profile(1.0, 0.15)},
        },
        questions=2000,
    )


def _hang() -> Scenario:
    """B1 is the best everywhere until it starts to hang: answers take 20 s and fail."""
    hung = _same(Profile(0.0, 20.0, fail_seconds=20.0))
    return Scenario(
        "hang",
        {"B1": _same(Profile(1.0, 0.1)), "B2": _same(Profile(0.98, 0.4))},
        questions=2000,
        changes=(Change(1000, {"B1": hung}, "B1 hangs"),),
    )


def _slow_but_sure() -> Scenario:
    """Slow but never failing against fast but failing a third of the time."""
    return Scenario(
        "slow-but-sure",
        {"Sure": _same(Profile(1.0, 1.5)), "Fast": _same(Profile(0.67, 0.05, fail_seconds=0.5))},
        questions=1500,
    )


def _noisy() -> Scenario:
    return Scenario(
        "noisy",
        {
            "B1": _same(Profile(0.98, 0.3, spread=1.2)),
            "B2": _same(Profile(0.9, 0.9, spread=1.2)),
            "B3": _same(Profile(0.98, 1.2, spread=0.8)),
        },
        questions=2000,
    )


def _many() -> Scenario:
    rng = random.Random(11)  # noqa: S311 - made-up profiles, nothing secret
    backends: Profiles = {}
    for b in range(8):
        backends[f"B{b + 1}"] = {
            intent: Profile(rng.choice([0.7, 0.9, 0.97, 1.0]), rng.choice([0.1, 0.3, 0.8, 1.5]))
            for intent in INTENTS
        }
    return Scenario("many", backends, questions=3000)


def _joining() -> Scenario:
    """A better backend joins half-way."""
    return Scenario(
        "joining",
        {"B1": _same(Profile(0.97, 0.5)), "B2": _same(Profile(0.95, 0.8))},
        questions=2500,
        changes=(Change(1000, {"New": _same(Profile(1.0, 0.1))}, "New joins"),),
    )


def _improving() -> Scenario:
    """A backend routing has learned to pass by gets much better, and nothing tells it:
    the incumbent never fails, so no fallback measures the other."""
    return Scenario(
        "improving",
        {"B1": _same(Profile(1.0, 0.5)), "B2": _same(Profile(0.9, 0.9))},
        questions=2500,
        changes=(Change(1000, {"B2": _same(Profile(1.0, 0.1))}, "B2 improves"),),
    )


def drawn(seed: int) -> Scenario:
    """A scenario drawn at random: 3-5 backends, per-intent profiles, one drift (two
    backends swap on some intents, or one degrades) half-way."""
    rng = random.Random(seed)  # noqa: S311
    names = [f"R{i + 1}" for i in range(rng.randint(3, 5))]

    def profile() -> Profile:
        return Profile(
            success=rng.choice([0.0, 0.6, 0.85, 0.95, 0.99, 1.0, 1.0]),
            median=rng.choice([0.05, 0.1, 0.2, 0.4, 0.8, 1.5]),
            spread=rng.choice([0.2, 0.4, 0.8]),
            fail_seconds=rng.choice([0.05, 0.5, 3.0]),
        )

    backends = {name: {intent: profile() for intent in INTENTS} for name in names}
    a, b = rng.sample(names, 2)
    swapped = rng.sample(list(INTENTS), rng.randint(1, len(INTENTS)))
    changed: Profiles = {
        a: {**backends[a], **{i: backends[b][i] for i in swapped}},
        b: {**backends[b], **{i: backends[a][i] for i in swapped}},
    }
    return Scenario(
        f"drawn-{seed}",
        backends,
        questions=3000,
        changes=(Change(1500, changed, f"{a} and {b} swap on {len(swapped)} intents"),),
    )


TUNING = {
    s.name: s
    for s in (
        _issue(),
        _stationary(),
        _hang(),
        _slow_but_sure(),
        _noisy(),
        _many(),
        _joining(),
        _improving(),
        *(drawn(seed) for seed in SEEN_SEEDS),
    )
}


def held_out() -> list[Scenario]:
    return [drawn(seed) for seed in HELD_OUT_SEEDS]


def with_questions(scenario: Scenario, questions: int) -> Scenario:
    return replace(scenario, questions=questions)

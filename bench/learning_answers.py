"""What Flywheel's answers say, as bench/learning.py's figures: for bench/learning_http.py.

Plain functions over plain values (no server, no database), so tests can call
them: an answer's routing block (or a failure's chain) read as a Question of the
simulator, a run's answers assembled into the simulator's Run, the time a
backend was kept out of an intent it does not fail, the windows under 90 %,
and the policy's numbers in seconds scaled with the run's time scale.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from bench.learning import COOLDOWN_SECONDS, WINDOW, Question, Run, oracle
from bench.learning_scenarios import Profiles, Scenario
from routing.selection.scoring import PolicyValues

SOUND = 0.999  # a backend this likely to answer an intent never fails it (as the simulator)
LOW = 0.90  # a window of 100 under this share of first = best misses the target
# The policy's numbers in seconds that a scenario's times meet, scaled with them.
SCALED_SECONDS = ("half_life_seconds", "failure_cost_seconds", "query_budget_seconds")


@dataclass(frozen=True)
class Answer:
    """What one answer of POST /api/v1/query says of its routing."""

    intent: str  # the intent it was routed for ("" if the answer does not say)
    chain: tuple[tuple[str, bool], ...]  # (backend, answered) per attempt, in order
    candidates: frozenset[str]  # the backends it could have gone to
    cached: bool = False  # an earlier answer stood in: every backend failed

    @property
    def first(self) -> str:
        return self.chain[0][0] if self.chain else ""


def answer_of(status: int, body: bytes) -> Answer:
    """Read an answer (200: its ``routing`` block) or a failure (its error's details:
    the intent and the chain tried, every candidate when none answered)."""
    try:
        data = json.loads(body)
    except ValueError:
        return Answer("", (), frozenset())
    if status == 200:
        routing = data.get("routing") or {}
        chain = tuple((a["backend"], bool(a["ok"])) for a in routing.get("fallback_chain", ()))
        names = frozenset(c["backend"] for c in routing.get("candidates", ()))
        return Answer(routing.get("intent", ""), chain, names, bool(routing.get("cached")))
    details = (data.get("error") or {}).get("details") or {}
    chain = tuple((a["backend"], bool(a["ok"])) for a in details.get("fallback_chain", ()))
    return Answer(details.get("intent", ""), chain, frozenset(b for b, _ in chain))


@dataclass
class Routed(Question):
    """A question as the simulator counts it, and what the kept-out figure needs: the
    backends it could have gone to, and those that never fail its intent."""

    candidates: frozenset[str] = frozenset()
    sound: frozenset[str] = frozenset()


def routed(
    n: int, start: float, end: float, answer: Answer, profiles: Profiles, cost: float
) -> Routed | None:
    """The question ``n``, asked at ``start`` under ``profiles`` and answered at ``end``,
    scored for the intent it was routed for; None if no backend serves that intent."""
    intent = answer.intent
    if not any(intent in by_intent for by_intent in profiles.values()):
        return None
    best, best_seconds = oracle(profiles, intent, cost)
    sound = frozenset(
        name
        for name, by_intent in profiles.items()
        if intent in by_intent and by_intent[intent].success >= SOUND
    )
    return Routed(
        n,
        intent,
        start,
        best,
        best_seconds,
        first=answer.first,
        failed=sum(not ok for _, ok in answer.chain),
        answered=any(ok for _, ok in answer.chain) and not answer.cached,
        end=end,
        candidates=answer.candidates,
        sound=sound,
    )


def assemble(
    scenario: Scenario, questions: Iterable[Routed], drifts: Sequence[tuple[int, float, str]]
) -> Run:
    """The simulator's Run: the questions in the order asked, numbered without gaps (a
    question left out moves the drifts after it), and the kept-out time."""
    ordered = sorted(questions, key=lambda q: q.n)
    asked = [q.n for q in ordered]
    moved = [(sum(n < at for n in asked), seconds, label) for at, seconds, label in drifts]
    for position, question in enumerate(ordered):
        question.n = position
    return Run(scenario, list(ordered), moved, sum(kept_out(ordered).values()))


def kept_out(questions: Sequence[Routed]) -> dict[tuple[str, str], float]:
    """Seconds each backend was out of an intent it never failed when it went out, by
    (backend, intent): what the simulator counts for a breaker open on a backend that
    never failed the intent when it opened.

    Per intent, from each question of it to the next: a backend that was a candidate
    for the intent before and is not one now (a breaker holds it out) counts for that
    interval if its profile never failed the intent at the first question it missed.
    """
    found: dict[tuple[str, str], float] = {}
    by_intent: dict[str, list[Routed]] = {}
    for question in sorted(questions, key=lambda q: q.start):
        by_intent.setdefault(question.intent, []).append(question)
    for intent, asked in by_intent.items():
        seen: set[str] = set()
        out: dict[str, bool] = {}  # out now -> never failed the intent when it went out
        for question, after in zip(asked, [*asked[1:], None], strict=True):
            seen |= question.candidates
            out = {b: out.get(b, b in question.sound) for b in seen - question.candidates}
            until = after.start if after is not None else question.end
            for backend in (b for b, sound in out.items() if sound):
                seconds = max(0.0, until - question.start)
                found[(backend, intent)] = found.get((backend, intent), 0.0) + seconds
    return found


def low_windows(run: Run) -> list[tuple[int, float]]:
    """The windows of 100 under LOW after the first 300 (those of a drift aside, as the
    verdict counts them): (first question, share)."""
    drift_windows = {d // WINDOW + k for d, _, _ in run.drift_times for k in (0, 1, 2)}
    found = []
    for w in range(3, math.ceil(len(run.questions) / WINDOW)):
        window = run.questions[w * WINDOW : (w + 1) * WINDOW]
        share = sum(q.first in q.oracle for q in window) / len(window)
        if w not in drift_windows and share < LOW:
            found.append((w * WINDOW, share))
    return found


def scaled_policy(scale: float) -> dict[str, float]:
    """The routing policy's numbers in seconds (and milliseconds), ``scale`` times their
    defaults: the half-life, the failure cost, the query budget, the latency ceiling of
    the reported score and the backend cooldown (whole seconds, at least 1)."""
    base = PolicyValues()
    values = {name: getattr(base, name) * scale for name in SCALED_SECONDS}
    values["latency_ceiling_ms"] = max(1, round(base.latency_ceiling_ms * scale))
    values["cooldown_seconds"] = max(1, round(COOLDOWN_SECONDS * scale))
    return values

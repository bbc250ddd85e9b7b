"""How well routing learns which backend answers which intent: a simulator in virtual time.

Drives routing's own code — the candidates and their order
(routing.selection.scoring.score_candidates, with Thompson sampling), the book
of evidence and its estimates (routing.selection.learning, .estimates) and the
breakers' windows (routing.selection.breaker.Windows) — against made-up
backends whose hidden profiles per intent bench/learning_scenarios.py sets.
Questions arrive with ``in_flight`` of them running at once; each attempt takes
the time its profile draws, in virtual time, so a scenario of thousands of
questions runs in seconds. What every process would share (the published
evidence) is refreshed every PUBLISH_SECONDS, as the decision writer does.
With the policy's ``hedging`` (``--set hedging=true``) the next candidate
starts too when one runs past its usual latency, as on the real path: the
first answer wins, and the other attempt is cancelled and not measured.

Printed per window of 100 questions: the share whose first choice was the best
backend for the intent (the oracle: the lowest true expected time to an answer
under the policy's failure cost), failed attempts, and the mean time to an
answer against the oracle's; then, per drift, how many questions and seconds
each intent took to follow it; and how long a backend was kept out of an intent
it does not fail. ``--check`` exits 1 when a target is missed:

- first choice = oracle in at least 97 % of questions after the first 300
  (the windows right after a drift aside);
- at least 90 % in every window of 100 after that, but the two following a drift;
- every drift followed within 15 s per intent;
- no backend kept out of an intent where it never fails.

Usage: python bench/learning.py [--scenario NAME ...|--held-out] [--seed N] [--check] [-v]
"""

from __future__ import annotations

import argparse
import contextlib
import heapq
import io
import math
import os
import random
import statistics
import sys
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, cast

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "flywheel.settings")
os.environ.setdefault("CACHE_URL", "locmemcache://")

import django

django.setup()

from bench.learning_scenarios import TUNING, Profiles, Scenario, held_out  # noqa: E402
from routing.selection.attempt import Attempt  # noqa: E402
from routing.selection.breaker import Change, Windows, scope_cooldown  # noqa: E402
from routing.selection.estimates import Evidence, expected  # noqa: E402
from routing.selection.learning import Beliefs, Book, beliefs  # noqa: E402
from routing.selection.scoring import (  # noqa: E402
    BackendEntry,
    Candidate,
    FlowEntry,
    HealthEntry,
    PolicyValues,
    Scope,
    awaiting_trial,
    in_cooldown,
    score_candidates,
)

START = 1_800_000_000.0  # virtual time starts here (seconds since the epoch)
PUBLISH_SECONDS = 0.5
COOLDOWN_SECONDS = 60.0  # the policy's default
WINDOW = 100
FOLLOW_RUN = 20  # a drift is followed once this many questions of the intent in a row...
FOLLOW_SHARE = 0.9  # ...went first to the new oracle at least this often
TIE = 0.05  # backends within 5 % of the best true expected time are as good as the best


@dataclass
class Question:
    n: int
    intent: str
    start: float
    oracle: frozenset[str]  # the best backend, and any within TIE of it
    oracle_seconds: float
    first: str = ""
    explored: bool = False  # first by a draw from its posterior, not by its estimate
    hedged: bool = False  # a second attempt started beside the first (policy hedging)
    failed: int = 0
    answered: bool = False
    end: float = 0.0


@dataclass
class _Attempt:
    candidate: Candidate
    token: int  # its place in the book's attempts in flight
    cancelled: bool = False  # the other hedged attempt answered first


@dataclass
class _Running:
    question: Question
    candidates: list[Candidate]
    index: int = 0  # the next candidate to start
    live: list[_Attempt] = field(default_factory=list)
    done: bool = False


@dataclass
class Run:
    scenario: Scenario
    questions: list[Question] = field(default_factory=list)
    drift_times: list[tuple[int, float, str]] = field(default_factory=list)
    kept_out: float = 0.0  # seconds a backend was out of an intent it never fails


def oracle(profiles: Profiles, intent: str, cost: float) -> tuple[frozenset[str], float]:
    """The best backends for ``intent`` (the lowest true expected time to an answer, at the
    failure cost ``cost``, and any within TIE of it), and that time."""
    options = {
        name: expected(p.success, p.median, p.fail_seconds, cost)
        for name, by_intent in profiles.items()
        if (p := by_intent.get(intent)) is not None
    }
    best = min(options.values())
    return frozenset(n for n, v in options.items() if v <= best * (1 + TIE)), best


class Simulation:
    def __init__(self, scenario: Scenario, policy: PolicyValues, seed: int) -> None:
        self.scenario, self.policy = scenario, policy
        self.outcomes = random.Random(seed)  # noqa: S311 - a simulation, nothing secret
        self.draws = random.Random(seed + 1)  # noqa: S311
        self.book = Book()
        self.windows = Windows()
        self.health: dict[int, HealthEntry] = {}
        self.scopes: dict[Scope, HealthEntry] = {}
        self.claimed: set[Scope] = set()
        self.opens: dict[Scope, int] = {}  # flow scopes: how many times in a row opened
        # Per open breaker, the intents its backend never failed when it opened.
        self.sound: dict[Scope, frozenset[str]] = {}
        self.published: dict[tuple[int, str], dict[int, Evidence]] = {}
        self.unstored: list[tuple[tuple[int, int, str], float]] = []  # attempts to publish
        self.profiles = {name: dict(p) for name, p in scenario.backends.items()}
        self.entries: list[BackendEntry] = []
        self.names: dict[int, str] = {}
        for name in scenario.backends:
            self._join(name)
        self.run = Run(scenario)
        self.now = START
        self.last_publish = START

    def _join(self, name: str) -> None:
        backend_id = len(self.entries) + 1
        flows = tuple(
            FlowEntry(
                id=backend_id * 100 + i,
                backend_id=backend_id,
                external_id=f"{name}-{intent}",
                name=f"{intent} flow",
                keywords=frozenset({intent}),
                keyword_count=1,
            )
            for i, intent in enumerate(self.scenario.intents)
        )
        self.entries.append(BackendEntry(backend_id, name, "flowise", tenant_id=1, flows=flows))
        self.names[backend_id] = name
        self.health[backend_id] = HealthEntry(True)

    def moment(self) -> datetime:
        return datetime.fromtimestamp(self.now, UTC)

    def oracle(self, intent: str) -> tuple[frozenset[str], float]:
        return oracle(self.profiles, intent, self.policy.failure_cost_seconds)

    def trial(self, scope: Scope) -> bool:
        if scope in self.claimed:
            return False
        self.claimed.add(scope)
        return True

    def on_trial(self, scope: Scope) -> bool:
        entry = self.health.get(scope[0]) if len(scope) == 1 else self.scopes.get(scope)
        return scope in self.claimed and awaiting_trial(entry, self.moment())

    def beliefs(self) -> Beliefs:
        return beliefs(
            self.published,
            now=self.now,
            half_life=self.policy.half_life_seconds,
            attempts_half_life=self.policy.half_life_attempts,
            default=self.policy.prior,
            on=self.book,
        )

    def plan(self, intent: str) -> list[Candidate]:
        known = self.beliefs()
        return score_candidates(
            self.entries,
            intent=intent,
            health=self.health,
            estimate_of=lambda b, f: known.of(b.id, f.id, intent),
            policy=self.policy,
            now=self.moment(),
            trial=self.trial,
            scopes=self.scopes,
            rng=self.draws,
        )

    def publish(self) -> None:
        """What the decision writer shares: every key's evidence, folded."""
        half_lives = self.policy.half_life_seconds, self.policy.half_life_attempts
        self.book.stored(self.unstored, self.now - 1e-6)  # the writer stored them
        self.unstored.clear()
        known = self.beliefs()
        for b in self.entries:
            for f in b.flows:
                for intent in f.keywords:
                    old = self.published.get((b.id, intent), {}).get(f.id)
                    _, moved_at = known.prior(b.id, intent)
                    seen = self.book.evidence(
                        (b.id, f.id, intent), old, self.now, *half_lives, moved_at
                    )
                    if seen.weight > 0:
                        self.published.setdefault((b.id, intent), {})[f.id] = seen
        self.last_publish = self.now

    def apply(self, change: Change) -> None:
        seconds = COOLDOWN_SECONDS
        if len(change.scope) > 1:
            opens = self.opens.get(change.scope, 0) + 1 if change.again else 1
            self.opens[change.scope] = opens
            seconds = scope_cooldown(opens, COOLDOWN_SECONDS)
        until = self.moment() + timedelta(seconds=seconds)
        if change.opened is not None:
            target = self.health if len(change.scope) == 1 else self.scopes
            key = change.scope[0] if len(change.scope) == 1 else change.scope
            if change.opened:
                target[key] = HealthEntry(True, cooldown_until=until, needs_trial=True)  # type: ignore[index]
                self.sound[change.scope] = self._never_failing(change.scope)
            elif len(change.scope) == 1:
                self.health[change.scope[0]] = HealthEntry(True)
            else:
                self.scopes.pop(change.scope, None)
        self.claimed.discard(change.scope)

    def _never_failing(self, scope: Scope) -> frozenset[str]:
        intents = self.scenario.intents if len(scope) == 1 else (str(scope[2]),)
        profiles = self.profiles[self.names[scope[0]]]
        return frozenset(i for i in intents if i in profiles and profiles[i].success >= 0.999)

    def kept_out(self, seconds: float) -> None:
        """Count the time backends spend out of intents they never failed when their
        breaker opened: what one intent's failures, or another flow's, cost the others."""
        moment = self.moment()
        for scope, intents in self.sound.items():
            entry = self.health.get(scope[0]) if len(scope) == 1 else self.scopes.get(scope)
            if intents and (in_cooldown(entry, moment) or awaiting_trial(entry, moment)):
                self.run.kept_out += seconds * len(intents)

    def simulate(self) -> Run:
        events: list[tuple[float, int, str, object]] = []
        seq = 0

        def push(at: float, kind: str, payload: object) -> None:
            nonlocal seq
            seq += 1
            heapq.heappush(events, (at, seq, kind, payload))

        asked = 0
        for _ in range(self.scenario.in_flight):
            push(self.now, "ask", None)
        changes = sorted(self.scenario.changes, key=lambda c: c.at)
        while events:
            at, _, kind, payload = heapq.heappop(events)
            if at - self.now > 0:
                self.kept_out(at - self.now)
            self.now = at
            if self.now - self.last_publish >= PUBLISH_SECONDS:
                self.publish()
            if kind == "ask":
                if asked >= self.scenario.questions:
                    continue
                while changes and changes[0].at <= asked:
                    change = changes.pop(0)
                    for name, profiles in change.backends.items():
                        if name not in self.profiles:
                            self._join(name)
                        self.profiles[name] = dict(profiles)
                    self.run.drift_times.append((asked, self.now, change.label))
                intent = self.scenario.intents[self.outcomes.randrange(len(self.scenario.intents))]
                oracle, oracle_seconds = self.oracle(intent)
                question = Question(asked, intent, self.now, oracle, oracle_seconds)
                asked += 1
                self.run.questions.append(question)
                running = _Running(question, self.plan(intent))
                if not running.candidates:
                    question.end = self.now
                    push(self.now, "ask", None)
                    continue
                question.first = running.candidates[0].backend.name
                question.explored = running.candidates[0].explored
                self.start(running, push)
            elif kind == "hedge":
                running, attempt = cast(tuple[_Running, _Attempt], payload)
                alone = running.live == [attempt] and running.index < len(running.candidates)
                if not running.done and alone:  # still running alone, unanswered
                    self.start(running, push, hedged=True)
            else:
                running, attempt, ok, seconds = cast(
                    tuple[_Running, _Attempt, bool, float], payload
                )
                if not attempt.cancelled:
                    self.finish(running, attempt, ok, seconds, push)
        return self.run

    def start(self, running: _Running, push: Any, hedged: bool = False) -> None:
        """Start the next candidate; with the policy's hedging, the one after it starts
        too if this one runs past its usual latency (as routing.answering.execution)."""
        candidate = running.candidates[running.index]
        running.index += 1
        intent = running.question.intent
        profile = self.profiles[candidate.backend.name][intent]
        ok = self.outcomes.random() < profile.success
        if ok:
            seconds = profile.median * math.exp(self.outcomes.gauss(0, profile.spread))
        else:
            seconds = profile.fail_seconds
        key = (candidate.backend.id, candidate.flow.id, intent)
        attempt = _Attempt(candidate, self.book.started(key, self.now))
        running.live.append(attempt)
        running.question.hedged |= hedged
        push(self.now + seconds, "finish", (running, attempt, ok, seconds))
        if self.policy.hedging and not hedged and running.index < len(running.candidates):
            push(self.now + candidate.estimate.usual_seconds, "hedge", (running, attempt))

    def finish(
        self, running: _Running, attempt: _Attempt, ok: bool, seconds: float, push: Any
    ) -> None:
        candidate = attempt.candidate
        question = running.question
        key = (candidate.backend.id, candidate.flow.id, question.intent)
        running.live.remove(attempt)
        self.book.finished(key, attempt.token)
        self.unstored.append((key, self.now))
        self.book.observe(
            key,
            self.now,
            ok,
            seconds,
            None,
            half_life=self.policy.half_life_seconds,
            attempts_half_life=self.policy.half_life_attempts,
        )
        measured = Attempt(
            backend_id=candidate.backend.id,
            backend=candidate.backend.name,
            flow_id=candidate.flow.id,
            flow=candidate.flow.name,
            ok=ok,
            latency_ms=seconds * 1000,
            error_type="" if ok else ("TimeoutError" if seconds >= 3 else "UnexpectedError"),
            retried=candidate.trial and candidate.estimate.retry_due,
        )
        change = self.windows.note(
            measured,
            question.intent,
            tenant_id=1,
            shared=False,
            probe_failed=False,
            on_trial=self.on_trial,
        )
        if change is not None:
            self.apply(change)
        if not ok:
            question.failed += 1
        if ok:  # the first answer wins: the other attempt is cancelled, and not measured
            for other in running.live:
                other.cancelled = True
                c = other.candidate
                self.book.finished((c.backend.id, c.flow.id, question.intent), other.token)
            running.live.clear()
        if running.live:  # the hedged attempt still runs
            return
        if ok or running.index >= len(running.candidates):
            running.done = True
            question.answered = ok
            question.end = self.now
            push(self.now, "ask", None)
            return
        self.start(running, push)


def _followed(run: Run, drift_at: int, drift_time: float) -> dict[str, tuple[int, float] | None]:
    """Per intent, (questions, seconds) from the drift until first choices followed it."""
    found: dict[str, tuple[int, float] | None] = {}
    for intent in run.scenario.intents:
        after = [q for q in run.questions if q.n >= drift_at and q.intent == intent]
        hits = [q.first in q.oracle for q in after]
        found[intent] = None
        for k in range(len(after) - FOLLOW_RUN + 1):
            if sum(hits[k : k + FOLLOW_RUN]) >= FOLLOW_SHARE * FOLLOW_RUN:
                found[intent] = (after[k].n - drift_at, after[k].start - drift_time)
                break
    return found


@dataclass
class Verdict:
    share_after_300: float
    worst_window: float
    slowest_follow: float
    kept_out: float
    misses: list[str]


def report(run: Run, *, verbose: bool) -> Verdict:
    s = run.scenario
    print(
        f"\n== {s.name}: {len(s.backends)} backends, {s.questions} questions, "
        f"{s.in_flight} in flight"
    )
    drift_windows = {d // WINDOW + k for d, _, _ in run.drift_times for k in (0, 1, 2)}
    shares: list[float] = []
    kept: list[bool] = []
    for w in range(math.ceil(len(run.questions) / WINDOW)):
        window = run.questions[w * WINDOW : (w + 1) * WINDOW]
        share = sum(q.first in q.oracle for q in window) / len(window)
        failed = sum(q.failed for q in window)
        unanswered = sum(not q.answered for q in window)
        mean = statistics.fmean(q.end - q.start for q in window)
        oracle = statistics.fmean(q.oracle_seconds for q in window)
        shares.append(share)
        kept.extend(
            q.first in q.oracle for q in window if w * WINDOW >= 300 and w not in drift_windows
        )
        if verbose or w in drift_windows or w < 3:
            mark = " (drift)" if w in drift_windows else ""
            print(
                f"  q{w * WINDOW:>5}: first = best {share:6.1%}, {failed:3} failed attempts, "
                f"{unanswered} unanswered, {mean:6.3f} s to an answer (oracle {oracle:.3f} s){mark}"
            )
    after = [sh for w, sh in enumerate(shares) if w * WINDOW >= 300 and w not in drift_windows]
    share_after = sum(kept) / len(kept) if kept else 1.0
    worst = min(after) if after else 1.0
    print(
        f"  after the first 300 (drift windows aside): first = best {share_after:.1%}; "
        f"worst window {worst:.0%}"
    )
    slowest = 0.0
    misses: list[str] = []
    for drift_at, drift_time, label in run.drift_times:
        followed = _followed(run, drift_at, drift_time)
        parts = []
        for intent, found in followed.items():
            if found is None:
                parts.append(f"{intent}: not followed")
                slowest = math.inf
            else:
                parts.append(f"{intent}: {found[0]} q / {found[1]:.1f} s")
                slowest = max(slowest, found[1])
        print(f"  drift at q{drift_at} ({label}): " + "; ".join(parts))
    print(f"  kept out of an intent it never fails: {run.kept_out:.1f} s")
    if share_after < 0.97:
        misses.append(f"{s.name}: first = best {share_after:.1%} < 97 %")
    if worst < 0.90:
        misses.append(f"{s.name}: a window at {worst:.0%} < 90 %")
    if slowest > 15:
        misses.append(f"{s.name}: a drift followed in {slowest:.1f} s > 15 s")
    if run.kept_out > 0:
        misses.append(
            f"{s.name}: a backend kept out {run.kept_out:.1f} s of an intent it never fails"
        )
    return Verdict(share_after, worst, slowest, run.kept_out, misses)


def brief(name: str, verdicts: list[Verdict]) -> str:
    """A scenario's runs in one line: the mean share (and the lowest), the worst window,
    the slowest follow and the longest kept out."""
    share = statistics.fmean(v.share_after_300 for v in verdicts)
    return (
        f"{name:>16}: first = best {share:6.1%}"
        f" (lowest {min(v.share_after_300 for v in verdicts):.1%}), worst window "
        f"{min(v.worst_window for v in verdicts):.0%}, slowest follow "
        f"{max(v.slowest_follow for v in verdicts):.1f} s, kept out "
        f"{max(v.kept_out for v in verdicts):.0f} s"
    )


def _setting(text: str) -> tuple[str, float | bool]:
    name, _, value = text.partition("=")
    return name, value == "true" if value in {"true", "false"} else float(value)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--scenario", action="append", choices=sorted(TUNING))
    parser.add_argument("--held-out", action="store_true", help="the scenarios never tuned on")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--seeds", type=int, default=1, help="run each scenario this many times")
    parser.add_argument("--brief", action="store_true", help="one line per scenario")
    parser.add_argument("--check", action="store_true", help="exit 1 when a target is missed")
    parser.add_argument("--set", action="append", metavar="FIELD=VALUE", help="a policy value")
    parser.add_argument("-v", "--verbose", action="store_true", help="every window")
    args = parser.parse_args()
    scenarios = (
        held_out() if args.held_out else [TUNING[n] for n in args.scenario or sorted(TUNING)]
    )
    settings: dict[str, Any] = dict(_setting(s) for s in args.set or [])
    policy = PolicyValues(**settings)
    print(
        f"policy: half-life {policy.half_life_seconds:.0f} s, failure cost "
        f"{policy.failure_cost_seconds:.1f} s, prior worth {policy.prior_strength:.0f} attempts"
    )
    misses: list[str] = []
    for scenario in scenarios:
        verdicts = []
        for seed in range(args.seed, args.seed + args.seeds):
            run = Simulation(scenario, policy, seed).simulate()
            if args.brief:
                with contextlib.redirect_stdout(io.StringIO()):
                    verdicts.append(report(run, verbose=False))
            else:
                verdicts.append(report(run, verbose=args.verbose))
            misses += verdicts[-1].misses
        if args.brief:
            print(brief(scenario.name, verdicts))
    print("\n" + ("targets met" if not misses else "targets missed:\n  " + "\n  ".join(misses)))
    return 1 if args.check and misses else 0


if __name__ == "__main__":
    sys.exit(main())

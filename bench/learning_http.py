"""How well routing learns which backend answers which intent, over the real HTTP path.

The scenarios of bench/learning.py (bench/learning_scenarios.py), in real time:
their made-up backends are Flowise servers emulated by bench/flowise_fleet.py
(one process, a port per backend, each prediction drawn from the backend's
hidden profile for the flow's intent: HTTP 500 for a failure, after its time),
registered in a real Flywheel served as bench/load.py serves it (uvicorn,
--workers, PostgreSQL, Redis, the decision writer on; its own database, cache
prefix and var directory) through Flywheel's own services (bench/learning_setup.py),
each backend with one flow per intent, every one matched alike, all owned by the
bench key's tenant (so that their breakers count its failures, as the simulator's). The questions,
labelled ones from tests/data/intent_dev.jsonl of an intent drawn at random, go
through POST /api/v1/query with the bench key, the scenario's number in flight
(8); at a drift the bench changes the profiles (or registers the backend that
joins) before it asks the drift's question.

By default each question names its intent (the query's ``intent`` override), so
what is measured is routing's choice for the intent; with --classify Flywheel
classifies it and each question counts for the intent it was routed for.

From each answer's routing block (its first attempt, its candidates, its
intent) the bench builds bench/learning.py's Run and prints its report: per
window of 100 the share whose first choice was the best backend, failed
attempts and the time to an answer (Flywheel's own time included) against the
oracle's; the share after the first 300; the windows under 90 %; per drift, the
questions and seconds each intent took to follow it; the time a backend was
kept out of an intent it never fails (here: absent from the candidates of that
intent's questions after it had been one, if it never failed the intent when it
went out). Then the decisions stored against the questions answered, and the
virtual-time simulator's line for the same scenario and seeds. The outcomes and
the questions follow the seed; Flywheel's own draws (Thompson sampling) and the
timing do not, so two runs of one seed differ.

--time-scale X: a scenario second lasts X wall seconds (0.5 runs twice as fast).
The backends' times are scaled, and so are the policy's half-life, failure cost,
query budget, latency ceiling and backend cooldown (and each backend's timeout,
the query budget); times are printed in the scenario's seconds. Routing's
constants in seconds are not (the flow breaker's first cooldown of 10 s, a
failing flow's retry after 30 s, the half-second memo of shared state, the
prior's typical latency of 1 s), nor is Flywheel's own time per question: at
X < 1 they weigh more in the scenario's time. At 1 (the default) nothing is
scaled, and the held-out scenarios take 1-5 minutes each.

Exit status 1 only if the run broke: a request without an answer, an answer
other than 200, 502 or 503, or stored decisions that do not match the
questions answered. Missed targets are printed, not errors.

Usage: python bench/learning_http.py [--scenario NAME ...] [--questions N]
       [--time-scale X] [--seed N] [--seeds N] [--workers N] [--classify] [--brief]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import io
import json
import os
import random
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import CHECKOUT, DATA, ROOT, free_port, manage
from bench.flowise_fleet import fleet, flow_id, set_profiles
from bench.learning import Simulation, Verdict, brief, report  # sets Django up, as `make sim`
from bench.learning_answers import (
    Routed,
    answer_of,
    assemble,
    kept_out,
    low_windows,
    routed,
    scaled_policy,
)
from bench.learning_scenarios import TUNING, Change, Profiles, Scenario, held_out, with_questions
from bench.loadgen import HttpConnection
from bench.rest import BENCH_KEY_LIMIT
from bench.rest import ENV as REST_ENV
from bench.serving import Server, decisions_stored, fresh_database, loadavg, served
from routing.selection.scoring import PolicyValues

PG = os.environ.get(
    "BENCH_LEARNING_DATABASE_URL",
    f"postgres://postgres@127.0.0.1:5432/flywheel_bench_learning_{CHECKOUT}",
)
REDIS = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379")
ENV = {
    **REST_ENV,  # log level, allowed hosts, backends on loopback
    "DATABASE_URL": PG,
    "CACHE_URL": f"{REDIS}/7",
    "CELERY_BROKER_URL": f"{REDIS}/8",
    "FLYWHEEL_CACHE_PREFIX": f"bench_learning_{CHECKOUT}",
    "FLYWHEEL_VAR_DIR": str(ROOT / "var" / "bench-learning"),
    "FLYWHEEL_ONBOARD_NEW_BACKENDS": "true",  # registering probes and discovers at once
}
OUTCOMES = {200, 502, 503}  # answered; every backend failed; none could be tried
STUCK_SECONDS = 30.0  # beyond the query budget, a request unanswered this long broke the run
DRAIN_SECONDS = 30.0  # for the decision writers, at the end
PROGRESS_EVERY = 1000  # questions


@dataclass(frozen=True)
class Asked:
    n: int
    intent: str  # labelled (and, unless --classify, given as the override)
    question: str
    start: float  # scenario seconds since the run began
    profiles: Profiles  # in force when asked (replaced at a drift, never changed)


@dataclass
class Drive:
    """One run in progress: what it asks, what is in force, what came back."""

    scenario: Scenario
    profiles: Profiles
    pool: dict[str, list[str]]  # intent -> labelled questions
    rng: random.Random
    scale: float
    classify: bool
    progress: bool = True  # a line every PROGRESS_EVERY questions
    began: float = field(default_factory=time.perf_counter)
    changes: list[Change] = field(default_factory=list)
    asked: int = 0
    drifts: list[tuple[int, float, str]] = field(default_factory=list)
    answers: list[tuple[Asked, float, int, bytes]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def clock(self) -> float:
        """Scenario seconds since the run began."""
        return (time.perf_counter() - self.began) / self.scale

    def draw(self) -> Asked:
        intent = self.rng.choice(self.scenario.intents)
        question = self.rng.choice(self.pool[intent])
        asked = Asked(self.asked, intent, question, self.clock(), self.profiles)
        self.asked += 1
        return asked


def labelled(intents: tuple[str, ...]) -> dict[str, list[str]]:
    """The development set's questions of the scenario's intents, by intent."""
    pool: dict[str, list[str]] = {intent: [] for intent in intents}
    for line in (DATA / "intent_dev.jsonl").read_text().splitlines():
        row = json.loads(line) if line else {}
        if row.get("intent") in pool:
            pool[row["intent"]].append(row["question"])
    return pool


# --- Backends and their registration ------------------------------------------------


def every_backend(scenario: Scenario) -> list[str]:
    """The scenario's backends, those that join at a drift included."""
    names = list(scenario.backends)
    for change in scenario.changes:
        names += [n for n in change.backends if n not in names]
    return names


def registration(
    names: list[str], profiles: Profiles, ports: dict[str, int], scale: float
) -> dict[str, Any]:
    """bench/learning_setup.py's plan for these backends (fresh: with the policy)."""
    return {
        "fresh": False,
        "timeout": PolicyValues().query_budget_seconds * scale,
        "backends": {
            name: {
                "url": f"http://127.0.0.1:{ports[name]}",
                "flows": {flow_id(name, intent): intent for intent in profiles[name]},
            }
            for name in names
        },
    }


def register(plan: dict[str, Any]) -> str:
    """Run the plan inside Flywheel; its output (fresh: the bench key, last)."""
    command = "from bench.learning_setup import main; main()"
    return manage(ENV, "shell", "-c", command, stdin=json.dumps(plan))


# --- Asking -------------------------------------------------------------------------


Join = Callable[[list[str], Profiles], None]  # registers backends that join


async def drift(drive: Drive, change: Change, fleet_port: int, join: Join) -> None:
    """Put the change in force: new profiles to the fleet, a joining backend registered
    (the questions wait for it); the drift's time is when it holds."""
    await set_profiles(fleet_port, change.backends)
    joining = [name for name in change.backends if name not in drive.profiles]
    if joining:
        await asyncio.to_thread(join, joining, change.backends)
    drive.profiles = {**drive.profiles, **change.backends}
    drive.drifts.append((drive.asked, drive.clock(), change.label))


async def ask_all(drive: Drive, port: int, key: str, fleet_port: int, join: Join) -> None:
    """The scenario's questions through POST /api/v1/query, ``in_flight`` at a time."""
    lock = asyncio.Lock()
    headers = {"Authorization": f"Bearer {key}"}
    stuck = PolicyValues().query_budget_seconds * drive.scale + STUCK_SECONDS

    async def next_question() -> Asked | None:
        async with lock:
            if drive.asked >= drive.scenario.questions:
                return None
            while drive.changes and drive.changes[0].at <= drive.asked:
                await drift(drive, drive.changes.pop(0), fleet_port, join)
            asked = drive.draw()
            if drive.progress and asked.n and asked.n % PROGRESS_EVERY == 0:
                print(f"  ...q{asked.n} at {asked.start:.1f} s", flush=True)
            return asked

    async def client() -> None:
        connection = await HttpConnection.open("127.0.0.1", port)
        while (asked := await next_question()) is not None:
            payload = {"question": asked.question}
            if not drive.classify:
                payload["intent"] = asked.intent
            try:
                post = connection.post("/api/v1/query", payload, headers)
                status, body = await asyncio.wait_for(post, stuck)
            except (OSError, EOFError, ValueError, RuntimeError, TimeoutError) as exc:
                drive.errors.append(f"q{asked.n}: {type(exc).__name__}: {exc}")
                connection.close()
                connection = await HttpConnection.open("127.0.0.1", port)
                continue
            drive.answers.append((asked, drive.clock(), status, body))
            if status not in OUTCOMES:
                drive.errors.append(f"q{asked.n}: HTTP {status}: {body[:200]!r}")
        connection.close()

    await asyncio.gather(*(client() for _ in range(drive.scenario.in_flight)))


# --- One run ------------------------------------------------------------------------


@dataclass
class Outcome:
    """One run: its figures, what went wrong, the decisions stored."""

    verdict: Verdict
    errors: list[str]
    routed_elsewhere: int  # --classify: routed for an intent no backend serves
    relabelled: int  # --classify: routed for another intent than its label
    decisions: int
    answered: int  # questions Flywheel answered (any status)
    seconds: float  # wall


def run_once(scenario: Scenario, seed: int, args: argparse.Namespace, quiet: bool) -> Outcome:
    """A fresh Flywheel and fleet, the scenario asked, the report printed."""
    started = time.perf_counter()
    ports = {name: free_port() for name in every_backend(scenario)}
    server = Server("Flywheel", ROOT, ENV)
    fresh_database(server)
    with fleet(ports, args.time_scale, seed) as fleet_process:
        fleet_port = next(iter(ports.values()))
        asyncio.run(set_profiles(fleet_port, scenario.backends))
        plan = registration(list(scenario.backends), scenario.backends, ports, args.time_scale)
        plan |= {"fresh": True, "policy": scaled_policy(args.time_scale), "limit": BENCH_KEY_LIMIT}
        key = register(plan).splitlines()[-1]
        drive = Drive(
            scenario,
            dict(scenario.backends),
            labelled(scenario.intents),
            random.Random(seed),  # noqa: S311 - which question, nothing secret
            args.time_scale,
            args.classify,
            progress=not quiet,
            changes=sorted(scenario.changes, key=lambda c: c.at),
        )

        def join(names: list[str], profiles: Profiles) -> None:
            register(registration(names, profiles, ports, args.time_scale))

        with served(server, args.workers):
            if not quiet:
                print(f"{scenario.name}, seed {seed}: {scenario.questions} questions", flush=True)
            if fleet_process.poll() is not None:
                raise RuntimeError("the fleet of backends stopped")
            drive.began = time.perf_counter()
            asyncio.run(ask_all(drive, server.port, key, fleet_port, join))
            if server.pg is None:
                raise RuntimeError("no database monitor")
            stored = decisions_stored(server.pg, len(drive.answers), DRAIN_SECONDS)
    return _outcome(drive, stored, time.perf_counter() - started, quiet)


def _outcome(drive: Drive, stored: int, seconds: float, quiet: bool) -> Outcome:
    cost = PolicyValues().failure_cost_seconds  # the scenario's seconds: the oracle's own
    questions: list[Routed] = []
    elsewhere = relabelled = 0
    for asked, end, status, body in drive.answers:
        answer = answer_of(status, body)
        if not answer.intent:  # a failure that does not say: the intent it was asked for
            answer = replace(answer, intent=asked.intent)
        question = routed(asked.n, asked.start, end, answer, asked.profiles, cost)
        relabelled += answer.intent != asked.intent
        if question is None:
            elsewhere += 1
        else:
            questions.append(question)
    run = assemble(drive.scenario, questions, drive.drifts)
    with contextlib.redirect_stdout(io.StringIO()) if quiet else contextlib.nullcontext():
        verdict = report(run, verbose=True)
        low = ", ".join(f"q{n} {share:.0%}" for n, share in low_windows(run)) or "none"
        print(f"  windows under 90 % after the first 300 (drift windows aside): {low}")
        kept = sorted(kept_out(questions).items())
        if kept:
            print("  kept out: " + ", ".join(f"{b} of {i} {s:.1f} s" for (b, i), s in kept))
    return Outcome(
        verdict, drive.errors, elsewhere, relabelled, stored, len(drive.answers), seconds
    )


# --- The command ------------------------------------------------------------------------


def scenarios(names: list[str] | None) -> list[Scenario]:
    known = {s.name: s for s in [*TUNING.values(), *held_out()]}
    return [known[n] for n in names] if names else held_out()


def parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    names = sorted(TUNING) + [s.name for s in held_out()]
    parser.add_argument(
        "--scenario", action="append", choices=names, help="default: the held-out ones"
    )
    parser.add_argument("--questions", type=int, help="default: the scenario's")
    parser.add_argument("--time-scale", type=float, default=1.0, help="wall s per scenario s")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--seeds", type=int, default=1, help="run each scenario this many times")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="uvicorn's")
    parser.add_argument(
        "--classify", action="store_true", help="Flywheel classifies (no intent override)"
    )
    parser.add_argument("--brief", action="store_true", help="one line per scenario")
    args = parser.parse_args()
    if args.time_scale <= 0:
        parser.error("--time-scale must be above 0")
    return args


def header(args: argparse.Namespace) -> None:
    print(f"Load average at start: {loadavg()} (1, 5, 15 min; {os.cpu_count()} cores)")
    mode = (
        "Flywheel classifies each question; it counts for the intent it was routed for"
        if args.classify
        else "each question names its intent (the intent override): routing's choice "
        "for the intent is measured, not classification"
    )
    print(f"Over HTTP, in real time, {args.workers} uvicorn worker(s): {mode}.")
    scaled = scaled_policy(args.time_scale)
    print(
        f"Time scale {args.time_scale:g}: times below in the scenario's seconds; policy "
        + ", ".join(f"{k} {v:g}" for k, v in scaled.items())
    )


def footer(outcome: Outcome, classify: bool) -> None:
    """The run's own checks: decisions against answers, errors, classification."""
    print(
        f"  decisions stored: {outcome.decisions}; questions answered: {outcome.answered}; "
        f"{len(outcome.errors)} error(s); {outcome.seconds:.0f} s wall with set-up"
    )
    if classify or outcome.routed_elsewhere:
        print(
            f"  classified: {outcome.relabelled} routed for another intent than their label, "
            f"{outcome.routed_elsewhere} for one no backend serves (left out)"
        )
    for error in outcome.errors[:5]:
        print(f"  error: {error}")


def main() -> int:
    args = parse()
    header(args)
    broke = False
    for scenario in scenarios(args.scenario):
        if args.questions:
            scenario = with_questions(scenario, args.questions)
        verdicts, virtual = [], []
        for seed in range(args.seed, args.seed + args.seeds):
            outcome = run_once(scenario, seed, args, quiet=args.brief)
            verdicts.append(outcome.verdict)
            if not args.brief or outcome.errors:
                footer(outcome, args.classify)
            broke |= bool(outcome.errors) or outcome.decisions != outcome.answered
            simulated = Simulation(scenario, PolicyValues(), seed).simulate()
            with contextlib.redirect_stdout(io.StringIO()):
                virtual.append(report(simulated, verbose=False))
        print(brief(f"{scenario.name} http", verdicts))
        print(brief(f"{scenario.name} virtual", virtual))
    print(f"Load average at end: {loadavg()}")
    if broke:
        print("FAILED: the run broke (errors, or decisions not matching the answers): see above")
    return 1 if broke else 0


if __name__ == "__main__":
    sys.exit(main())

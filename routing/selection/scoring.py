"""Candidate selection and ranking, as pure functions over plain values.

Match decides who is a candidate (seed 000): 0 when no flow of the backend
serves the intent, else 0.5 + 0.5 * min(len(keywords) / 10, 1) for its best
flow; a generic flow serves any intent at half that, and only after the flows
made for it. A backend whose best flow is made for the intent offers its best
generic flow too, behind it: the fallback for that flow failing. With query
routing on, a flow's scope counts by the query type's weight of it
(routing/selection/breadth.py): not at all at 0.5 (a 50/50 HYBRID question),
up to a little more match and a shorter expected time at 1, down to a little
less and a longer one at 0.

What was measured decides among candidates: each has an estimate of its chance
of success and time to answer (routing.selection.estimates), and they are tried
in increasing order of the expected time to a successful answer, counting what
a failure costs. A real query's first is chosen by one draw from each posterior
(Thompson sampling), its spread times the policy's ``exploration``: a backend
routing is unsure of gets tried about as often as it might be the best, one it
is sure of seldom, and with ``exploration`` 0 never.

The seed's composite score is still reported for every candidate:
score = w_match * match + w_health * health + w_performance * performance
        + w_tokens * tokens, where performance = 0.7 * estimated success
        + 0.3 * (1 - min(typical latency / ceiling, 1)), and tokens
        = 1 - min(mean total tokens / token ceiling, 1) (0.5 when none reported).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime

from backends.adapters.traits import Tunable
from routing.selection.breadth import scope_adjusted, scope_fit
from routing.selection.estimates import Estimate, Prior

GENERIC_FACTOR = 0.5
NO_USAGE_TOKENS = 0.5


@dataclass(frozen=True)
class Arm:
    """One arm of an intent's A/B split (routing.selection.splits)."""

    label: str
    backend_id: int
    flow_id: int | None  # None: the flow routing would use on the backend
    weight: int


@dataclass(frozen=True)
class PolicyValues:
    weight_match: float = 0.5
    weight_health: float = 0.3
    weight_performance: float = 0.2
    weight_tokens: float = 0.0
    performance_window: int = 100
    latency_ceiling_ms: float = 5000.0
    token_ceiling: float = 4000.0
    confidence_threshold: float = 0.7
    llm_classification_enabled: bool = True
    answer_cache_ttl_seconds: int = 3600
    query_budget_seconds: float = 30.0
    half_life_seconds: float = 40.0
    half_life_attempts: float = 50.0
    failure_cost_seconds: float = 5.0
    prior_strength: float = 2.0
    exploration: float = 0.5
    hedging: bool = False
    learn_from_llm: bool = False
    splits: tuple[tuple[str, tuple[Arm, ...]], ...] = ()  # (intent, its arms), enabled only

    def arms(self, intent: str) -> tuple[Arm, ...]:
        """The arms of the intent's A/B split (none: no split)."""
        return next((arms for name, arms in self.splits if name == intent), ())

    @property
    def prior(self) -> Prior:
        return Prior(strength=self.prior_strength)


@dataclass(frozen=True)
class FlowEntry:
    id: int
    backend_id: int
    external_id: str
    name: str
    keywords: frozenset[str]
    keyword_count: int
    scope: str = "any"
    is_generic: bool = False
    tunable: Tunable = ()  # where temperature and max_tokens reach it


@dataclass(frozen=True)
class BackendEntry:
    id: int
    name: str
    kind: str
    weight: float = 1.0
    tenant_id: int | None = None
    flows: tuple[FlowEntry, ...] = ()
    version: str = ""


@dataclass(frozen=True)
class HealthEntry:
    healthy: bool
    cooldown_until: datetime | None = None
    needs_trial: bool = False  # the breaker opened: past the cooldown, one query tries it
    probe_failed: bool = False  # its last health probe failed (not merely never probed)


# Where a breaker opens: a backend (backend id,), or one flow for one intent
# (backend id, flow id, intent).
Scope = tuple[int] | tuple[int, int, str]

# Asked, for a scope whose breaker waits for its trial, whether this query may be
# the one (routing.selection.breaker.trial_claim); None: no (dry runs, the analytics page).
Trial = Callable[[Scope], bool]
EstimateOf = Callable[[BackendEntry, FlowEntry], Estimate]


@dataclass(frozen=True)
class Candidate:
    backend: BackendEntry
    flow: FlowEntry
    match: float
    health: float
    performance: float
    score: float
    estimate: Estimate
    expected_seconds: float  # to a successful answer when tried first (the ranking)
    stretch: float = 1.0  # what scope fit and token usage make of the estimate's time
    generic: bool = False
    notes: tuple[str, ...] = field(default_factory=tuple)
    tokens: float = NO_USAGE_TOKENS
    trial: bool = False  # its breaker's one trial after a cooldown: tried first
    explored: bool = False  # first by a draw from its posterior, not by its mean
    arm: str = ""  # first as this arm of the intent's A/B split

    def as_dict(self) -> dict[str, object]:
        e = self.estimate
        found: dict[str, object] = {
            "backend": self.backend.name,
            "kind": self.backend.kind,
            "flow": self.flow.name,
            "flow_id": self.flow.external_id,
            "score": self.score,
            "match": self.match,
            "health": self.health,
            "performance": self.performance,
            "tokens": self.tokens,
            "generic": self.generic,
            "success": round(e.success, 4),
            "success_margin": round(e.success_margin, 4),
            "typical_ms": round(e.typical_seconds * 1000, 1),
            "attempts": round(e.attempts, 1),
            "expected_seconds": round(self.expected_seconds, 4),
        }
        if self.arm:  # only then: most candidates never are
            found["arm"] = self.arm
        return found


def match_score(flow: FlowEntry, intent: str) -> float:
    specificity = min(flow.keyword_count / 10, 1.0)
    base = 0.5 + 0.5 * specificity
    if intent in flow.keywords:
        return base
    return base * GENERIC_FACTOR if flow.is_generic else 0.0


def performance_score(estimate: Estimate, ceiling_ms: float) -> float:
    latency = 1.0 - min(estimate.typical_seconds * 1000 / ceiling_ms, 1.0)
    return 0.7 * estimate.success + 0.3 * latency


def tokens_score(estimate: Estimate, ceiling: float) -> float:
    if estimate.tokens is None:
        return NO_USAGE_TOKENS
    return 1.0 - min(estimate.tokens / ceiling, 1.0)


def best_flow(
    backend: BackendEntry,
    intent: str,
    global_weight: float | None,
    usable: Callable[[FlowEntry], bool] = lambda flow: True,
) -> tuple[FlowEntry, float] | None:
    """The backend's usable flow with the highest match for the intent, if any matches."""
    matching = [
        (f, scope_adjusted(match_score(f, intent), f, global_weight)) for f in backend.flows
    ]
    matching.sort(key=lambda found: -found[1])  # stable: the first listed of equals
    return next(((f, score) for f, score in matching if score > 0 and usable(f)), None)


def in_cooldown(health: HealthEntry | None, now: datetime) -> bool:
    return bool(health and health.cooldown_until and health.cooldown_until > now)


def awaiting_trial(health: HealthEntry | None, now: datetime) -> bool:
    """Past a cooldown its traffic opened, before one query has tried it again."""
    return bool(health and health.needs_trial and not in_cooldown(health, now))


def tryable(scope: Scope, health: HealthEntry | None, now: datetime, trial: Trial | None) -> bool:
    """Not in cooldown; and if it awaits its trial, this query claimed it."""
    if in_cooldown(health, now):
        return False
    return not awaiting_trial(health, now) or (trial is not None and trial(scope))


def score_candidates(
    backends: Iterable[BackendEntry],
    *,
    intent: str,
    health: Mapping[int, HealthEntry],
    estimate_of: EstimateOf,
    policy: PolicyValues,
    now: datetime,
    global_weight: float | None = None,
    trial: Trial | None = None,
    scopes: Mapping[Scope, HealthEntry] | None = None,
    rng: random.Random | None = None,
) -> list[Candidate]:
    """Every backend able to serve the intent, in the order to try them.

    A backend offers its best flow for the intent; when that flow is made for the
    intent, its best generic flow too (generic_behind), so that a failure of the
    one still leaves the backend's other to answer. Backends in cooldown are left
    out, and so are flows whose breaker for this intent is open (``scopes``); one
    awaiting its trial is left out unless ``trial`` lets this query be it (then it
    goes first: the trial is what closes its breaker). A generic flow offered
    behind another claims no trial, which would put it before the flow made for
    the intent. Then flows made for the intent before generic ones, healthy
    backends before unhealthy ones, and within each, increasing expected time to
    an answer; with ``rng`` (and the policy's ``exploration`` above 0) the first
    of them by one draw from each posterior instead. Ties (nothing measured yet)
    go to the seed's higher score, so the flow matching the intent better, then the
    higher backend weight, then the name, so the order is stable.
    """
    scopes = scopes or {}
    candidates: list[Candidate] = []
    for backend in backends:
        state = health.get(backend.id)
        if in_cooldown(state, now):
            continue
        if awaiting_trial(state, now) and not tryable((backend.id,), state, now, trial):
            continue
        open_flows = _FlowBreakers(backend.id, intent, scopes, now, trial)
        found = best_flow(backend, intent, global_weight, open_flows.usable)
        if found is None:
            continue
        closed = _FlowBreakers(backend.id, intent, scopes, now, None).usable
        spare = generic_behind(backend, found[0], intent, global_weight, closed)
        first, *behind = [
            scored(
                backend, flow, intent=intent, match=match, health=state,
                estimate=estimate_of(backend, flow), policy=policy, global_weight=global_weight,
            )
            for flow, match in filter(None, (found, spare))
        ]  # fmt: skip
        on_trial = (
            awaiting_trial(state, now)
            or first.flow.id in open_flows.trials
            # It only failed, a while ago: a real query that may explore tries it once more.
            or (first.estimate.retry_due and trial is not None and policy.exploration > 0)
        )
        candidates += [replace(first, trial=True) if on_trial else first, *behind]
    return ranked(candidates, rng, policy.failure_cost_seconds, policy.exploration)


def generic_behind(
    backend: BackendEntry,
    best: FlowEntry,
    intent: str,
    global_weight: float | None,
    usable: Callable[[FlowEntry], bool],
) -> tuple[FlowEntry, float] | None:
    """The backend's best usable generic flow, when its ``best`` for the intent is one made
    for it: offered behind it, so that when the flow made for the intent fails, the
    fallback chain still reaches the backend's generic flow (None: ``best`` is generic
    itself, or the backend has no other)."""
    if intent not in best.keywords:
        return None
    return best_flow(
        backend, intent, global_weight, lambda f: intent not in f.keywords and usable(f)
    )


class _FlowBreakers:
    """Which of a backend's flows the breakers of their scope for ``intent`` let through:
    closed, or half-open with this query claiming the trial (then in ``trials``)."""

    def __init__(
        self,
        backend_id: int,
        intent: str,
        scopes: Mapping[Scope, HealthEntry],
        now: datetime,
        trial: Trial | None,
    ) -> None:
        self.backend_id, self.intent, self.scopes = backend_id, intent, scopes
        self.now, self.trial = now, trial
        self.trials: set[int] = set()

    def usable(self, flow: FlowEntry) -> bool:
        scope: Scope = (self.backend_id, flow.id, self.intent)
        entry = self.scopes.get(scope)
        if entry is None:
            return True
        if not tryable(scope, entry, self.now, self.trial):
            return False
        if awaiting_trial(entry, self.now):
            self.trials.add(flow.id)
        return True


def _tier(c: Candidate) -> tuple[bool, bool, bool]:
    return (not c.trial, c.generic, c.health < 1.0)


def ranked(
    candidates: list[Candidate],
    rng: random.Random | None,
    failure_cost: float,
    exploration: float = 1.0,
) -> list[Candidate]:
    """Best first: see score_candidates."""
    candidates.sort(  # to the microsecond: estimates alike tie, whatever the float rounding
        key=lambda c: (
            *_tier(c),
            round(c.expected_seconds, 6),
            -c.score,  # alike (nothing measured yet): the seed's score, the better match
            -c.backend.weight,
            c.backend.name,
        )
    )
    if rng is None or not exploration or len(candidates) < 2 or candidates[0].trial:
        return candidates
    tier = _tier(candidates[0])
    rivals = [c for c in candidates if _tier(c) == tier]
    if len(rivals) < 2:
        return candidates
    drawn = min(
        rivals,
        key=lambda c: c.estimate.sampled_seconds(failure_cost, rng, exploration) * c.stretch,
    )
    if drawn is candidates[0]:
        return candidates
    return [replace(drawn, explored=True), *(c for c in candidates if c is not drawn)]


def scored(
    backend: BackendEntry,
    flow: FlowEntry,
    *,
    intent: str,
    match: float,
    health: HealthEntry | None,
    estimate: Estimate,
    policy: PolicyValues,
    global_weight: float | None = None,
) -> Candidate:
    """One backend's flow as a candidate: its estimate, and the seed's weighted score."""
    healthy = 1.0 if health is not None and health.healthy else 0.0
    perf = performance_score(estimate, policy.latency_ceiling_ms)
    tokens = tokens_score(estimate, policy.token_ceiling)
    score = policy.weight_match * match + policy.weight_health * healthy
    score += policy.weight_performance * perf + policy.weight_tokens * tokens
    stretch = scope_fit(flow, global_weight)
    if policy.weight_tokens and estimate.tokens is not None:
        stretch *= 1 + policy.weight_tokens * (1 - tokens)  # more tokens, a longer wait
    expected = estimate.expected_seconds(policy.failure_cost_seconds) * stretch
    return Candidate(
        backend=backend,
        flow=flow,
        match=round(match, 4),
        health=healthy,
        performance=round(perf, 4),
        tokens=round(tokens, 4),
        score=round(score, 4),
        estimate=estimate,
        expected_seconds=expected,
        stretch=stretch,
        generic=intent not in flow.keywords,
    )

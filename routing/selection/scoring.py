"""Candidate selection and scoring (seed 000), as pure functions over plain values.

score = w_match * match + w_health * health + w_performance * performance
        + w_tokens * tokens (the policy's token weight is 0 unless an admin sets it)

- match: 0 when no flow of the backend serves the intent, else
  0.5 + 0.5 * min(len(keywords) / 10, 1) for its best flow; a generic flow
  serves any intent at half that. With query routing on, a flow whose scope
  fits the question's type scores a little more, one that does not, less.
- health: 1 healthy, 0 not (a backend in cooldown is not a candidate at all).
- performance: over the last N attempts for backend + intent,
  0.7 * success_rate + 0.3 * (1 - min(avg_latency / ceiling, 1)); 0.5 with none.
- tokens: over the same attempts, 1 - min(mean total tokens / token ceiling, 1);
  0.5 when none of them reported usage (the backend's flows have no LLM node, or
  it does not say).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime

GENERIC_FACTOR = 0.5
SCOPE_FIT_BONUS = 0.1
SCOPE_MISFIT_FACTOR = 0.8
NO_HISTORY_PERFORMANCE = 0.5
NO_USAGE_TOKENS = 0.5


@dataclass(frozen=True)
class PolicyValues:
    weight_match: float = 0.5
    weight_health: float = 0.3
    weight_performance: float = 0.2
    weight_tokens: float = 0.0
    performance_window: int = 10
    latency_ceiling_ms: float = 5000.0
    token_ceiling: float = 4000.0
    confidence_threshold: float = 0.7
    llm_classification_enabled: bool = True
    answer_cache_ttl_seconds: int = 3600
    query_budget_seconds: float = 30.0
    performance_max_age_seconds: float = 60.0
    exploration_share: float = 0.05
    learn_from_llm: bool = False


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


# Asked, for a backend whose breaker waits for its trial, whether this query may be
# the one (routing.selection.breaker.trial_claim); None: no (dry runs, the analytics page).
Trial = Callable[[int], bool]


@dataclass(frozen=True)
class Performance:
    """The last N attempts for one backend + intent."""

    attempts: int
    success_rate: float
    avg_latency_ms: float
    last_at: datetime | None = None  # the newest attempt's time (None: not known)
    avg_tokens: float | None = None  # over the attempts that reported usage; None: none did

    def stale(self, now: datetime, max_age_seconds: float) -> bool:
        """Whether the newest attempt is older than ``max_age_seconds``: then it says too
        little of the backend now, and counts as no history at all."""
        return self.last_at is not None and (now - self.last_at).total_seconds() > max_age_seconds


@dataclass(frozen=True)
class Candidate:
    backend: BackendEntry
    flow: FlowEntry
    match: float
    health: float
    performance: float
    score: float
    generic: bool = False
    notes: tuple[str, ...] = field(default_factory=tuple)
    tokens: float = NO_USAGE_TOKENS
    trial: bool = False  # its breaker's one trial after a cooldown: tried first

    def as_dict(self) -> dict[str, object]:
        return {
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
        }


def match_score(flow: FlowEntry, intent: str) -> float:
    specificity = min(flow.keyword_count / 10, 1.0)
    base = 0.5 + 0.5 * specificity
    if intent in flow.keywords:
        return base
    return base * GENERIC_FACTOR if flow.is_generic else 0.0


def scope_adjusted(score: float, flow: FlowEntry, query_type: str | None) -> float:
    if not score or query_type not in {"GLOBAL", "LOCAL"} or flow.scope == "any":
        return score
    if flow.scope == query_type.lower():
        return min(1.0, score + SCOPE_FIT_BONUS)
    return score * SCOPE_MISFIT_FACTOR


def performance_score(perf: Performance | None, ceiling_ms: float) -> float:
    if perf is None or perf.attempts == 0:
        return NO_HISTORY_PERFORMANCE
    latency = 1.0 - min(perf.avg_latency_ms / ceiling_ms, 1.0)
    return 0.7 * perf.success_rate + 0.3 * latency


def tokens_score(perf: Performance | None, ceiling: float) -> float:
    if perf is None or perf.avg_tokens is None:
        return NO_USAGE_TOKENS
    return 1.0 - min(perf.avg_tokens / ceiling, 1.0)


def best_flow(
    backend: BackendEntry, intent: str, query_type: str | None
) -> tuple[FlowEntry, float] | None:
    """The backend's flow with the highest match for the intent, if any matches."""
    best: tuple[FlowEntry, float] | None = None
    for flow in backend.flows:
        score = scope_adjusted(match_score(flow, intent), flow, query_type)
        if score > 0 and (best is None or score > best[1]):
            best = (flow, score)
    return best


def in_cooldown(health: HealthEntry | None, now: datetime) -> bool:
    return bool(health and health.cooldown_until and health.cooldown_until > now)


def awaiting_trial(health: HealthEntry | None, now: datetime) -> bool:
    """Past a cooldown its traffic opened, before one query has tried it again."""
    return bool(health and health.needs_trial and not in_cooldown(health, now))


def tryable(
    backend_id: int, health: HealthEntry | None, now: datetime, trial: Trial | None
) -> bool:
    """Not in cooldown; and if it awaits its trial, this query claimed it."""
    if in_cooldown(health, now):
        return False
    return not awaiting_trial(health, now) or (trial is not None and trial(backend_id))


def score_candidates(
    backends: Iterable[BackendEntry],
    *,
    intent: str,
    health: Mapping[int, HealthEntry],
    performance: Mapping[int, Performance],
    policy: PolicyValues,
    now: datetime,
    query_type: str | None = None,
    trial: Trial | None = None,
) -> list[Candidate]:
    """Every backend able to serve the intent, best first.

    Backends in cooldown are left out, and so is one awaiting its trial unless
    ``trial`` lets this query be it (then it goes first: the trial is what
    closes its breaker); backends without a flow for the intent (and no generic
    flow) are left out. Ties go to the higher backend weight, then the name, so
    the order is stable.
    """
    candidates: list[Candidate] = []
    for backend in backends:
        state = health.get(backend.id)
        if in_cooldown(state, now):
            continue
        found = best_flow(backend, intent, query_type)
        if found is None:
            continue
        on_trial = awaiting_trial(state, now)
        if on_trial and not tryable(backend.id, state, now, trial):
            continue
        flow, match = found
        candidate = scored(
            backend,
            flow,
            intent=intent,
            match=match,
            health=state,
            performance=performance.get(backend.id),
            policy=policy,
        )
        candidates.append(replace(candidate, trial=True) if on_trial else candidate)
    candidates.sort(key=lambda c: (not c.trial, -c.score, -c.backend.weight, c.backend.name))
    return candidates


def scored(
    backend: BackendEntry,
    flow: FlowEntry,
    *,
    intent: str,
    match: float,
    health: HealthEntry | None,
    performance: Performance | None,
    policy: PolicyValues,
) -> Candidate:
    """One backend's flow as a candidate, with the weighted score of its factors."""
    healthy = 1.0 if health is not None and health.healthy else 0.0
    perf = performance_score(performance, policy.latency_ceiling_ms)
    tokens = tokens_score(performance, policy.token_ceiling)
    score = policy.weight_match * match + policy.weight_health * healthy
    score += policy.weight_performance * perf + policy.weight_tokens * tokens
    return Candidate(
        backend=backend,
        flow=flow,
        match=round(match, 4),
        health=healthy,
        performance=round(perf, 4),
        tokens=round(tokens, 4),
        score=round(score, 4),
        generic=intent not in flow.keywords,
    )

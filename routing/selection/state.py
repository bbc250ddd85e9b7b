"""What routing reads on the hot path, memoised in process over the shared cache.

Backends and flows (chatflows.snapshot) and health (backends.snapshot) come
from the snapshots the background tasks publish; the policy comes from the
shared cache too, and so do the open breakers of flow scopes and the evidence
every process learned (routing.selection.learning). Each process keeps what it
read for MEMO_SECONDS, so
answering a question costs no network round trip at all when warm, and a
change made anywhere is seen everywhere within about a second.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from django.utils.dateparse import parse_datetime

from backends import snapshot as health_snapshot
from backends.policy import HealthPolicy
from chatflows import snapshot as flows_snapshot
from flywheel.cache import shared_cache
from flywheel.errors import DATABASE_UNAVAILABLE
from flywheel.singleflight import SingleFlight
from routing.classification.learned import LearnedModel
from routing.classification.rules import IntentRuleSet, intent_rules
from routing.classification.training import classifier_current
from routing.models import ClassifierKind, RoutingPolicy, SplitArm
from routing.selection.estimates import Evidence
from routing.selection.learning import Beliefs, Published, beliefs
from routing.selection.scoring import (
    Arm,
    BackendEntry,
    FlowEntry,
    HealthEntry,
    PolicyValues,
    Scope,
)

# Half of the second within which every process must see a change made anywhere: the
# rest is for the change's own writes and the request that reads it (tests/scenarios/test_scale_out
# saw 0.82-0.97 s with a 1 s memo, too close to the promise). Re-reading costs each
# process two cache reads a second.
MEMO_SECONDS = 0.5
POLICY_KEY = "flywheel:snapshot:policy"
EVIDENCE_KEY = "flywheel:evidence:{backend}"  # {intent: {flow id: Evidence}}
EVIDENCE_TTL_SECONDS = 24 * 3600
SCOPES_KEY = "flywheel:breaker:scopes"  # the open flow scopes (routing.selection.breaker)
BackendEvidence = dict[str, dict[int, Evidence]]


@dataclass(frozen=True)
class RoutingState:
    backends: tuple[BackendEntry, ...]
    health: dict[int, HealthEntry]
    policy: PolicyValues
    rules: IntentRuleSet
    intent_model: LearnedModel | None = (
        None  # learned from examples (routing.classification.training)
    )
    type_model: LearnedModel | None = None

    scopes: dict[Scope, HealthEntry] = field(default_factory=dict)  # open flow breakers

    def beliefs(self, backends: Iterable[BackendEntry], at: float | None = None) -> Beliefs:
        """What is known of the backends' flows, seen at ``at`` (seconds since the epoch;
        default now)."""
        policy = self.policy
        return beliefs(
            published_evidence([b.id for b in backends]),
            now=time.time() if at is None else at,
            half_life=policy.half_life_seconds,
            attempts_half_life=policy.half_life_attempts,
            default=policy.prior,
        )

    def backends_for(self, tenant_id: int | None) -> list[BackendEntry]:
        """Shared backends plus the tenant's own."""
        return [b for b in self.backends if b.tenant_id is None or b.tenant_id == tenant_id]


def _table(published: dict[str, Any]) -> tuple[BackendEntry, ...]:
    flows: dict[int, list[FlowEntry]] = {}
    for f in published["flows"]:
        keywords = f["intent_keywords"]
        flows.setdefault(f["backend"], []).append(
            FlowEntry(
                id=f["id"],
                backend_id=f["backend"],
                external_id=f["external_id"],
                name=f["name"],
                keywords=frozenset(keywords),
                keyword_count=len(keywords),
                scope=f["scope"],
                is_generic=f["is_generic"],
                tunable=tuple(tuple(t) for t in f.get("tunable", ())),
            )
        )
    return tuple(
        BackendEntry(
            id=b["id"],
            name=b["name"],
            kind=b["kind"],
            weight=b["weight"],
            tenant_id=b["tenant"],
            flows=tuple(flows.get(b["id"], ())),
            version=b["version"],
        )
        for b in published["backends"].values()
    )


def _health(published: dict[int, dict[str, Any]]) -> dict[int, HealthEntry]:
    return {
        backend_id: HealthEntry(
            healthy=h["healthy"],
            cooldown_until=parse_datetime(h["cooldown_until"]) if h["cooldown_until"] else None,
            needs_trial=h.get("needs_trial", False),  # absent from snapshots published before
            probe_failed=h.get("consecutive_failures", 0) > 0,
        )
        for backend_id, h in published.items()
    }


def _scopes(published: dict[str, dict[str, Any]]) -> dict[Scope, HealthEntry]:
    """The open flow scopes, ``"backend:flow:intent" -> {"until": epoch seconds}``:
    past ``until``, each awaits its trial."""
    found: dict[Scope, HealthEntry] = {}
    for key, entry in published.items():
        backend_id, flow_id, intent = key.split(":", 2)
        found[(int(backend_id), int(flow_id), intent)] = HealthEntry(
            healthy=True,
            cooldown_until=datetime.fromtimestamp(entry["until"], UTC),
            needs_trial=True,
        )
    return found


def policy_values() -> PolicyValues:
    values = shared_cache().get(POLICY_KEY)
    if values is None:
        from routing.selection.state import routing_policy_get

        p = routing_policy_get()
        values = PolicyValues(
            weight_match=p.weight_match,
            weight_health=p.weight_health,
            weight_performance=p.weight_performance,
            weight_tokens=p.weight_tokens,
            performance_window=p.performance_window,
            latency_ceiling_ms=float(p.latency_ceiling_ms),
            token_ceiling=float(p.token_ceiling),
            confidence_threshold=p.confidence_threshold,
            llm_classification_enabled=p.llm_classification_enabled,
            answer_cache_ttl_seconds=p.answer_cache_ttl_seconds,
            query_budget_seconds=p.query_budget_seconds,
            half_life_seconds=p.half_life_seconds,
            half_life_attempts=p.half_life_attempts,
            failure_cost_seconds=p.failure_cost_seconds,
            prior_strength=p.prior_strength,
            exploration=p.exploration,
            hedging=p.hedging,
            learn_from_llm=p.learn_from_llm,
            splits=_splits(),
        )
        shared_cache().set(POLICY_KEY, values, timeout=300)
    return values


def _splits() -> tuple[tuple[str, tuple[Arm, ...]], ...]:
    """The enabled A/B splits, with their arms (routing.models.Split)."""
    found: dict[str, list[Arm]] = {}
    arms = SplitArm.objects.filter(split__enabled=True, split__intent__enabled=True)
    for intent, label, backend_id, flow_id, weight in arms.values_list(
        "split__intent__slug", "label", "backend_id", "flow_id", "weight"
    ).order_by("split__intent__slug", "label"):
        found.setdefault(intent, []).append(Arm(label, backend_id, flow_id, weight))
    return tuple((intent, tuple(each)) for intent, each in found.items())


def routing_policy_get() -> RoutingPolicy:
    """Return the routing policy, creating it with the defaults if it is missing."""
    policy, _ = RoutingPolicy.objects.get_or_create(key="default")
    return policy


def routing_health_policy() -> HealthPolicy:
    """The policy's health numbers, for backends (registered in routing/apps.py)."""
    policy = routing_policy_get()
    return HealthPolicy(
        cooldown_failures=policy.cooldown_failures,
        cooldown_seconds=policy.cooldown_seconds,
        health_cache_ttl_seconds=policy.health_cache_ttl_seconds,
        flow_cache_ttl_seconds=policy.flow_cache_ttl_seconds,
    )


class _Memo:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._state: RoutingState | None = None
        self._state_at = 0.0
        self._evidence: dict[int, tuple[float, BackendEvidence]] = {}

    def fresh(self) -> RoutingState | None:
        state = self._state
        if state is not None and time.monotonic() - self._state_at < MEMO_SECONDS:
            return state
        return None

    def state(self) -> RoutingState:
        state = self.fresh()
        if state is not None:
            return state
        with self._lock:
            state = self.fresh()  # another thread may have refreshed it while this one waited
            if state is not None:
                return state
            try:
                self._state = RoutingState(
                    backends=_table(flows_snapshot.read_flows()),
                    health=_health(health_snapshot.read_health()),
                    policy=policy_values(),
                    rules=intent_rules(),
                    intent_model=classifier_current(ClassifierKind.INTENT),
                    type_model=classifier_current(ClassifierKind.QUERY_TYPE),
                    scopes=_scopes(shared_cache().get(SCOPES_KEY) or {}),
                )
            except DATABASE_UNAVAILABLE:
                # What the cache lacked is in the database, and it is down: routing goes
                # on with what it last knew (tried again after MEMO_SECONDS).
                if self._state is None:
                    raise
            self._state_at = time.monotonic()
            return self._state

    def evidence(self, backend_ids: Iterable[int]) -> dict[int, BackendEvidence]:
        now = time.monotonic()
        result: dict[int, BackendEvidence] = {}
        missing: list[int] = []
        for backend_id in backend_ids:
            memo = self._evidence.get(backend_id)
            if memo is not None and now - memo[0] < MEMO_SECONDS:
                result[backend_id] = memo[1]
            else:
                missing.append(backend_id)
        if missing:
            keys = {EVIDENCE_KEY.format(backend=b): b for b in missing}
            found = shared_cache().get_many(list(keys))
            for key, backend_id in keys.items():
                result[backend_id] = found.get(key) or {}
                self._evidence[backend_id] = (now, result[backend_id])
        return result

    def remember(self, backend_id: int, evidence: BackendEvidence) -> None:
        self._evidence[backend_id] = (time.monotonic(), evidence)

    def clear(self) -> None:
        with self._lock:
            self._state = None
            self._evidence.clear()


_memo = _Memo()
_refreshes: SingleFlight[RoutingState] = SingleFlight()


def routing_state() -> RoutingState:
    return _memo.state()


async def current_state() -> RoutingState:
    """The routing state; from this process's memo when fresh, else read in a thread
    (once, however many queries are waiting for it)."""
    fresh = _memo.fresh()
    if fresh is not None:
        return fresh
    from flywheel.asyncdb import db

    return await _refreshes.do("state", db(routing_state))


def published_evidence(backend_ids: Iterable[int]) -> Published:
    """What every process learned of the backends, as (backend id, intent) -> by flow."""
    return {
        (backend_id, intent): flows
        for backend_id, by_intent in _memo.evidence(backend_ids).items()
        for intent, flows in by_intent.items()
    }


def publish_evidence(evidence: Mapping[int, BackendEvidence]) -> None:
    """Share the evidence of some backends, folded from the stored records, with every
    process: one cache write for all of them."""
    shared_cache().set_many(
        {EVIDENCE_KEY.format(backend=b): e for b, e in evidence.items()}, EVIDENCE_TTL_SECONDS
    )
    for backend_id, e in evidence.items():
        _memo.remember(backend_id, e)


def forget() -> None:
    """Drop this process's memo (tests; after an edit that must show at once)."""
    _memo.clear()


def now() -> datetime:
    """The time now, aware (UTC): what django.utils.timezone.now() gives with USE_TZ,
    without reading the settings on every call of the query path."""
    return datetime.now(UTC)

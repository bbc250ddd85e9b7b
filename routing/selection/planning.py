"""From a question to an ordered list of candidates: classification and selection.

Everything here reads only the in-process RoutingState (no database, no
network) except the optional LLM, which is awaited only when the rules are
unsure and an LLM is configured and enabled in the policy.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from backends.selectors import as_id
from flywheel.errors import ValidationError
from routing.errors import BackendUnavailableError, NoMatchingFlowError
from routing.selection.scoring import (
    Arm,
    BackendEntry,
    Candidate,
    EstimateOf,
    FlowEntry,
    HealthEntry,
    Trial,
    best_flow,
    match_score,
    score_candidates,
    scored,
    tryable,
)
from routing.selection.splits import ArmCandidate, split_first
from routing.selection.state import RoutingState


@dataclass(frozen=True)
class Plan:
    candidates: tuple[Candidate, ...]
    routing_method: str  # auto | explicit
    all_down: bool = False  # candidates exist only on backends that are down

    @property
    def explored(self) -> bool:
        """The first candidate was drawn from its posterior, not chosen by its mean."""
        return bool(self.candidates) and self.candidates[0].explored

    @property
    def arm(self) -> str:
        """The A/B split's arm that put the first candidate first ("": none did)."""
        return self.candidates[0].arm if self.candidates else ""


_draws = random.Random()  # noqa: S311 - Thompson sampling's draws, nothing secret


def estimates_for(state: RoutingState, backends: list[BackendEntry], intent: str) -> EstimateOf:
    """Each candidate flow's estimate for ``intent``, from what every process learned."""
    known = state.beliefs(backends)
    return lambda backend, flow: known.of(backend.id, flow.id, intent)


def _named_backends(backends: list[BackendEntry], preference: str) -> list[BackendEntry]:
    """The backends a query's ``backend`` (not "auto") names: the one of that name, else
    those of that kind, else the one of that id (as chatflows.lifecycle finds a backend).
    Raises ValidationError when it names none."""
    wanted = preference.lower()
    named = [b for b in backends if b.name.lower() == wanted]
    # Names are unique per owner: a tenant's own backend may share a shared one's
    # name, and then the tenant means its own.
    named = [b for b in named if b.tenant_id is not None] or named
    named = named or [b for b in backends if b.kind == wanted]
    if not named and (pk := as_id(preference)) is not None:
        named = [b for b in backends if b.id == pk]
    if not named:
        raise ValidationError(
            f"No backend named {preference!r}, of that kind or with that id.",
            details={"backend": preference, "known": sorted(b.name for b in backends)},
        )
    return named


def _explicit(
    state: RoutingState,
    backends: list[BackendEntry],
    *,
    preference: str,
    intent: str,
    now: datetime,
    trial: Trial | None,
) -> Plan:
    named = _named_backends(backends, preference)
    usable = [
        b
        for b in named
        if (state.health.get(b.id) is None or state.health[b.id].healthy)
        and tryable((b.id,), state.health.get(b.id), now, trial)
    ]
    if not usable:
        raise BackendUnavailableError(
            f"Backend {preference!r} is unavailable (unhealthy or in cooldown).",
            details={"backend": preference},
        )
    # The factor scores are recorded for the trace and only order the backends of a
    # kind asked for by kind; the named backend is used whatever its score.
    candidates = score_candidates(
        usable,
        intent=intent,
        health={b.id: HealthEntry(True) for b in usable},  # usable: healthy or not yet probed
        estimate_of=estimates_for(state, usable, intent),
        policy=state.policy,
        now=now,
        trial=trial,
        scopes=state.scopes,
    )
    if not candidates:
        raise NoMatchingFlowError(
            f"Backend {preference!r} has no flow for intent {intent!r} and no generic flow.",
            details={"backend": preference, "intent": intent},
        )
    return Plan(tuple(candidates), "explicit")


def _ranked(
    state: RoutingState,
    backends: list[BackendEntry],
    *,
    intent: str,
    global_weight: float | None,
    now: datetime,
    trial: Trial | None = None,
    estimate_of: EstimateOf | None = None,
) -> list[Candidate]:
    """The backends able to serve the intent, in the order to try them; a real query
    (``trial`` given) explores, a dry run gets routing's preference as it stands."""
    return score_candidates(
        backends,
        intent=intent,
        health=state.health,
        estimate_of=estimate_of or estimates_for(state, backends, intent),
        policy=state.policy,
        now=now,
        global_weight=global_weight,
        trial=trial,
        scopes=state.scopes,
        rng=_draws if trial is not None else None,
    )


def plan(
    state: RoutingState,
    *,
    tenant_id: int | None,
    intent: str,
    global_weight: float | None,
    preference: str,
    now: datetime,
    trial: Trial | None = None,
    fallback: bool = False,
) -> Plan:
    """The candidates to try, in order. Raises for a bad explicit backend or no matching flow.

    A backend asked for (``preference``) comes first; with ``fallback`` the others
    follow it, as routing ranks them, and answer even if it cannot run at all.

    A real query passes ``trial`` (routing.selection.breaker.trial_claim), asked about
    scopes whose breaker awaits a trial query; with it, the first candidate is
    chosen by Thompson sampling (scoring.ranked), or by the intent's A/B split
    (routing.selection.splits). A dry run passes nothing and gets routing's
    preference as it stands."""
    backends = state.backends_for(tenant_id)
    if preference.lower() != "auto":
        refused: BackendUnavailableError | NoMatchingFlowError | None = None
        try:
            chosen = _explicit(
                state, backends, preference=preference, intent=intent, now=now, trial=trial
            )
        except (BackendUnavailableError, NoMatchingFlowError) as err:
            if not fallback:
                raise
            chosen, refused = Plan((), "explicit"), err
        if not fallback:
            return chosen
        asked = {c.backend.id for c in chosen.candidates}
        others = _routed_except(
            state, tenant_id, intent, global_weight, now, trial, lambda c: c.backend.id in asked
        )
        if refused is not None and not others:
            raise refused  # nothing else could answer either: why the one asked for cannot
        return Plan((*chosen.candidates, *others), "explicit")
    known = estimates_for(state, backends, intent)
    candidates = _ranked(
        state,
        backends,
        intent=intent,
        global_weight=global_weight,
        now=now,
        trial=trial,
        estimate_of=known,
    )
    arms = state.policy.arms(intent)
    if arms and candidates and trial is not None:  # a real query: its split's arm first
        arm_candidate = _arm_candidates(state, backends, intent, global_weight, now, known)
        candidates = split_first(candidates, arms, arm_candidate, _draws)
    if not candidates:
        if any(best_flow(b, intent, None) for b in backends):
            return Plan((), "auto", all_down=True)  # matching flows exist, all in cooldown
        if not backends:
            raise NoMatchingFlowError(NO_BACKEND, details={"intent": intent, "backends": 0})
        raise NoMatchingFlowError(
            f"No flow serves intent {intent!r}, and there is no generic flow. In the admin "
            "(Flows), add the intent to a flow's keywords or tick 'generic' on one; or run "
            ".venv/bin/python manage.py set_flow FLOW --backend NAME --generic "
            f"(or --intents {intent}).",
            details={"intent": intent},
        )
    return Plan(tuple(candidates), "auto")


def _routed_except(
    state: RoutingState,
    tenant_id: int | None,
    intent: str,
    global_weight: float | None,
    now: datetime,
    trial: Trial | None,
    skip: Callable[[Candidate], bool],
) -> tuple[Candidate, ...]:
    """Routing's candidates for the intent but those ``skip`` names: what follows a
    backend or flow asked for, when others may answer for it (none: no flow serves it)."""
    try:
        ranked = plan(
            state,
            tenant_id=tenant_id,
            intent=intent,
            global_weight=global_weight,
            preference="auto",
            now=now,
            trial=trial,
        ).candidates
    except NoMatchingFlowError:
        return ()
    return tuple(c for c in ranked if not skip(c))


def _arm_candidates(
    state: RoutingState,
    backends: list[BackendEntry],
    intent: str,
    global_weight: float | None,
    now: datetime,
    known: EstimateOf,
) -> ArmCandidate:
    """The candidate each arm stands for, if it can answer now: its backend among the
    caller's, healthy (or not probed yet) and out of cooldown; its flow (or the backend's
    best for the intent) serving the intent, its breaker closed. Arms claim no trials."""
    by_id = {b.id: b for b in backends}

    def candidate_of(arm: Arm) -> Candidate | None:
        backend = by_id.get(arm.backend_id)
        if backend is None:
            return None
        health = state.health.get(backend.id) or HealthEntry(True)
        if not health.healthy or not tryable((backend.id,), health, now, None):
            return None

        def usable(flow: FlowEntry) -> bool:
            scope = (backend.id, flow.id, intent)
            wanted = arm.flow_id is None or flow.id == arm.flow_id
            return wanted and tryable(scope, state.scopes.get(scope), now, None)

        found = best_flow(backend, intent, global_weight, usable)
        if found is None:
            return None
        flow, match = found
        return scored(
            backend, flow, intent=intent, match=match, health=health,
            estimate=known(backend, flow), policy=state.policy, global_weight=global_weight,
        )  # fmt: skip

    return candidate_of


NO_BACKEND = (
    "No backend is registered yet, so no flow can answer. Add a Flowise or Langflow "
    "server: in the admin (Backends, Add), with POST /api/v1/backends, or with "
    "`.venv/bin/python manage.py add_backend --name NAME --kind flowise|langflow --url URL`."
)


def preferences(
    state: RoutingState, *, tenant_id: int | None, intent: str, now: datetime
) -> list[Candidate]:
    """What routing would try now for ``intent``, best first, scored as a query would be
    (no query type); ``tenant_id=None`` looks at every backend, not only shared ones.
    Empty when no flow serves the intent or every backend that could is in cooldown."""
    backends = list(state.backends) if tenant_id is None else state.backends_for(tenant_id)
    return _ranked(state, backends, intent=intent, global_weight=None, now=now)


class FlowNotRoutable(Exception):
    """The named flow is not among the routable ones: the caller looks up why."""


def _runnable(
    state: RoutingState,
    backend: BackendEntry,
    entry: FlowEntry,
    intent: str,
    now: datetime,
    trial: Trial | None,
) -> Candidate | None:
    """``entry`` on ``backend`` as a candidate, if its backend and its flow's breaker let
    it run (healthy or not yet probed)."""
    health = state.health.get(backend.id)
    scope = (backend.id, entry.id, intent)
    if not (
        (health is None or health.healthy)
        and tryable((backend.id,), health, now, trial)
        and tryable(scope, state.scopes.get(scope), now, trial)
    ):
        return None
    return scored(
        backend,
        entry,
        intent=intent,
        match=match_score(entry, intent),
        health=HealthEntry(True),
        estimate=estimates_for(state, [backend], intent)(backend, entry),
        policy=state.policy,
    )


def _named_flows(
    backends: list[BackendEntry], flow: str, preference: str
) -> list[tuple[BackendEntry, FlowEntry]]:
    if preference.lower() != "auto":
        backends = _named_backends(backends, preference)
    pk = as_id(flow)  # as chatflows.lifecycle.resolve_flow reads it
    found = [(b, f) for b in backends for f in b.flows if f.external_id == flow or f.id == pk]
    by_external_id = [(b, f) for b, f in found if f.external_id == flow]
    return by_external_id or found


def plan_flow(
    state: RoutingState,
    *,
    tenant_id: int | None,
    intent: str,
    global_weight: float | None,
    flow: str,
    preference: str,
    fallback: bool,
    now: datetime,
    trial: Trial | None = None,
) -> Plan:
    """Run one given flow (a Flow id or the backend's id for it); with ``fallback``, the
    usual candidates for the intent follow it. The method is "explicit". A flow whose
    id is on several backends (the same flow served by each) runs on the best of them,
    and the others follow it.

    Raises FlowNotRoutable when the caller's routable flows hold no such flow, and
    BackendUnavailableError when every backend holding it is down or in cooldown
    (unless ``fallback``).
    """
    backends = state.backends_for(tenant_id)
    named = _named_flows(backends, flow, preference)
    if not named:
        raise FlowNotRoutable(flow)
    first = sorted(
        (
            candidate
            for backend, entry in named
            if (candidate := _runnable(state, backend, entry, intent, now, trial)) is not None
        ),
        key=lambda c: -c.score,
    )
    backend, entry = named[0]
    if not first and not fallback:
        holders = ", ".join(repr(b.name) for b, _ in named)
        raise BackendUnavailableError(
            f"Backend {holders} of flow {entry.name!r} is unavailable (unhealthy or in cooldown)."
            if len(named) == 1
            else f"Every backend of flow {entry.name!r} ({holders}) is unavailable.",
            details={"backend": backend.name, "flow": flow},
        )
    rest: tuple[Candidate, ...] = ()
    if fallback:
        ids = {e.id for _, e in named}
        rest = _routed_except(
            state, tenant_id, intent, global_weight, now, trial, lambda c: c.flow.id in ids
        )
    if not first and not rest:
        raise BackendUnavailableError(
            f"Backend {backend.name!r} of flow {entry.name!r} is unavailable, and no other "
            f"flow serves intent {intent!r}.",
            details={"backend": backend.name, "flow": flow, "intent": intent},
        )
    return Plan((*first, *rest), "explicit")

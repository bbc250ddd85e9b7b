"""The arms of A/B splits compared: how each arm's questions were answered.

A split (routing.models.Split) sends an intent's questions first to one of its
arms; the decision keeps the arm in its evidence (``evidence.arm``) and its
first candidate is the arm's backend and flow (by name, or by id in a compact
row). Read from the decisions of the range (a split runs for days; the rollups
do not keep arms).
"""

from __future__ import annotations

import math
import statistics
from datetime import datetime
from typing import Any

from django.db.models.fields.json import KT

from analytics.filters import AnalyticsQuery
from analytics.reads import window_of
from flywheel.contract import validated_filters
from flywheel.models import Tenant
from routing.models import ANSWERED_OUTCOMES, Outcome, RoutingDecision
from routing.recording.compact import names_of


def split_arms(
    *,
    tenant: Tenant | None,
    since: str | datetime | None = None,
    until: str | datetime | None = None,
    intent: str | None = None,
) -> dict[str, Any]:
    """Over a range (the last 24 hours by default; ``tenant`` None: every tenant), per
    intent with split decisions, each arm (as it pointed: an arm moved to another
    backend shows once per backend and flow):

    - ``questions`` and ``share`` of the intent's split questions;
    - ``first_answered``: the share its first choice answered (no fallback);
    - ``answered``: the share answered at all (fallback, cache included);
    - ``median_ms`` and ``p90_ms`` of the answered questions' total time.

    Raises ValidationError for a bad range (analytics.reads.window_of) or intent.
    """
    validated_filters(AnalyticsQuery, intent=intent)
    window = window_of(since, until)
    # The evidence is json text (no has_key): its arm read as text, where it has one.
    decisions = RoutingDecision.objects.alias(arm=KT("evidence__arm")).filter(
        created_at__gte=window.start, created_at__lt=window.end, arm__isnull=False
    )
    if tenant is not None:
        decisions = decisions.filter(tenant=tenant)
    if intent:
        decisions = decisions.filter(intent=intent)
    # The first candidate's backend and flow: by name in rows of the earlier shape, by
    # id in compact ones (routing.recording.compact), named from their rows here.
    rows = decisions.values_list(
        "intent",
        KT("evidence__arm"),
        KT("candidates__0__backend"),
        KT("candidates__0__flow"),
        KT("candidates__0__0"),
        KT("candidates__0__1"),
        "outcome",
        "total_ms",
    )
    firsts: dict[tuple[Any, ...], list[tuple[str, float]]] = {}
    for *first, outcome, total_ms in rows.iterator(chunk_size=2000):
        firsts.setdefault(tuple(first), []).append((outcome, total_ms))
    names = names_of(
        {int(key[4]) for key in firsts if key[4] is not None},
        {int(key[5]) for key in firsts if key[5] is not None},
    )
    arms: dict[tuple[str, str, str, str], list[tuple[str, float]]] = {}
    for (name, arm, backend, flow, backend_id, flow_id), each in firsts.items():
        if backend_id is not None:
            backend = names.backend(int(backend_id))[0]
        if flow_id is not None:
            flow = names.flow(int(flow_id))[0]
        arms.setdefault((name, arm, backend or "", flow or ""), []).extend(each)
    by_intent: dict[str, list[dict[str, Any]]] = {}
    for (name, arm, backend, flow), seen in sorted(arms.items()):
        by_intent.setdefault(name, []).append(_arm(arm, backend, flow, seen))
    return {
        "since": window.start,
        "until": window.end,
        "intents": [
            {
                "intent": name,
                "questions": sum(a["questions"] for a in found),
                "arms": _shared(found),
            }
            for name, found in by_intent.items()
        ],
    }


def _arm(arm: str, backend: str, flow: str, seen: list[tuple[str, float]]) -> dict[str, Any]:
    answered = sorted(ms for outcome, ms in seen if outcome in ANSWERED_OUTCOMES)
    first = sum(1 for outcome, _ in seen if outcome == Outcome.SUCCESS)
    return {
        "arm": arm,
        "backend": backend,
        "flow": flow,
        "questions": len(seen),
        "first_answered": round(first / len(seen), 4),
        "answered": round(len(answered) / len(seen), 4),
        "median_ms": round(statistics.median(answered), 1) if answered else None,
        "p90_ms": round(_quantile(answered, 0.9), 1) if answered else None,
    }


def _quantile(ordered: list[float], q: float) -> float:
    """The nearest-rank quantile of sorted values."""
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


def _shared(arms: list[dict[str, Any]]) -> list[dict[str, Any]]:
    total = sum(a["questions"] for a in arms)
    return [{**a, "share": round(a["questions"] / total, 4)} for a in arms]

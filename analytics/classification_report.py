"""How questions were classified: which step of the cascade decided, what admins corrected,
and the learned models in use (issue 9's "flywheel" made visible)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db.models import Count

from analytics.reads import tallies, window_of
from analytics.rollups import Tally
from flywheel.models import Tenant
from routing.models import ClassifierModel, IntentExample, QueryTypeExample, RoutingDecision


def classification_summary(
    *,
    tenant: Tenant | None,
    since: str | datetime | None = None,
    until: str | datetime | None = None,
) -> dict[str, Any]:
    """Over a range (the last 24 hours by default; ``tenant`` None: every tenant):

    - ``methods``: the decisions per classification method (rules, context, example,
      model, llm, override, default: nothing was sure), with their share;
    - ``corrections``: per detected intent, what admins corrected it to and how often;
    - ``models``: the learned classifier in use per kind (version, examples,
      cross-validated accuracy, when it was trained);
    - ``examples``: how many examples each classifier has, per source.

    Raises ValidationError for a bad range (analytics.reads.window_of).
    """
    window = window_of(since, until)
    # Decision-level tallies (no backend) carry the counts per method: read from the
    # rollups plus the decisions not rolled up yet, like every analytics read.
    totals = tallies(tenant=tenant, window=window, by=("backend",)).get((None,), Tally())
    methods = sorted(totals.methods.items(), key=lambda m: (-m[1], m[0]))
    classified = sum(n for _, n in methods)
    corrected = RoutingDecision.objects.filter(
        created_at__gte=window.start, created_at__lt=window.end, corrected_at__isnull=False
    )
    if tenant is not None:
        corrected = corrected.filter(tenant=tenant)
    corrections = (
        corrected.values("intent", "corrected_intent")
        .annotate(decisions=Count("id"))
        .order_by("-decisions", "intent", "corrected_intent")
    )
    return {
        "since": window.start,
        "until": window.end,
        "decisions": classified,
        "methods": [
            {"method": method, "decisions": n, "share": round(n / classified, 4)}
            for method, n in methods
        ],
        "corrections": [
            {
                "intent": c["intent"],
                "corrected_to": c["corrected_intent"],
                "decisions": c["decisions"],
            }
            for c in corrections
        ],
        "models": _models(),
        "examples": {
            "intent": _by_source(IntentExample.objects.values("source")),
            "query_type": _by_source(QueryTypeExample.objects.values("source")),
        },
    }


def _models() -> list[dict[str, Any]]:
    newest = []
    for kind in ("intent", "query_type"):
        row = ClassifierModel.objects.filter(kind=kind).defer("artefact").first()
        if row is not None:
            newest.append(
                {
                    "kind": kind,
                    "version": row.pk,
                    "examples": row.examples,
                    "accuracy": row.accuracy,
                    "trained_at": row.created_at,
                }
            )
    return newest


def _by_source(rows: Any) -> dict[str, int]:
    return {r["source"]: r["n"] for r in rows.annotate(n=Count("id")).order_by("source")}

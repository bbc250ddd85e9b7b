"""Pages for people: the front page, analytics by intent, the decision list, a
decision's trace and a session's visualisation.

Each page needs a login and reads through analytics.access: a person sees the
tenant they act for; staff with the permission to view routing decisions see
every tenant and may pick one. The views only read request parameters and call
the selectors; the numbers come from the same functions as the REST API.
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import timedelta
from typing import Any
from urllib.parse import urlencode

from django.contrib.auth.decorators import login_required
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone

from analytics import charts
from analytics.access import Scope, scope_for_user
from analytics.classification_report import classification_summary
from analytics.figures import whole_percents
from analytics.health import health_timeline
from analytics.reads import overview, totals
from analytics.rollups import STEP
from analytics.selectors import decisions_for
from analytics.splits import split_arms
from analytics.visualize import decision_for, decision_story, session_visualization
from backends.models import Backend
from backends.selectors import backends_visible_to
from flywheel.errors import ApplicationError
from flywheel.pages import error_page
from flywheel.services import tenant_for_user
from routing.models import Intent, Outcome, RoutingDecision

RANGES = {
    "1h": timedelta(hours=1),
    "6h": timedelta(hours=6),
    "24h": timedelta(hours=24),
    "7d": timedelta(days=7),
    "30d": timedelta(days=30),
}
DEFAULT_RANGE = "24h"
DECISIONS_PER_PAGE = 50
MAX_PAGE = 1000  # deeper than this, filter (the offset would cost more than it shows)

View = Callable[..., HttpResponse]


def page(view: View) -> View:
    """Login required; an application error (bad filter, no tenant) is shown as a page
    with its status, in the one look."""

    @login_required
    @functools.wraps(view)
    def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        try:
            return view(request, *args, **kwargs)
        except ApplicationError as err:
            return error_page(request, err)

    return wrapped


def _scope(request: HttpRequest) -> Scope:
    return scope_for_user(request.user, tenant=request.GET.get("tenant") or None)


def _backends(scope: Scope) -> list[Backend]:
    if scope.tenant is None:
        found = Backend.objects.select_related("health").order_by("name", "id")
    else:
        found = backends_visible_to(scope.tenant)
    return list(found)


@page
def home(request: HttpRequest) -> HttpResponse:
    """What Flywheel is, the backends and their health, and where to go next."""
    scope = _scope(request)
    midnight = timezone.now().replace(hour=0, minute=0, second=0, microsecond=0)
    context = {
        "scope": scope,
        "backends": _backends(scope),
        "today": totals(tenant=scope.tenant, since=midnight),
    }
    return render(request, "pages/home.html", context)


def _filters(request: HttpRequest, scope: Scope) -> dict[str, Any]:
    chosen = request.GET.get("range") or DEFAULT_RANGE
    if chosen not in RANGES:
        chosen = DEFAULT_RANGE
    return {
        "range": chosen,
        "intent": request.GET.get("intent") or None,
        "tenant": scope.tenant.slug if scope.tenant and scope.staff else None,
    }


def _with_shares(intent: dict[str, Any]) -> dict[str, Any]:
    """The intent with each backend's share of its decisions in whole percents that add
    up to 100 with ``unrouted``: the share no backend answered (cache, failures)."""
    won = [b["won"] for b in intent["backends"]]
    *shares, unrouted = whole_percents([*won, max(0, intent["decisions"] - sum(won))])
    backends = [{**b, "share_pct": s} for b, s in zip(intent["backends"], shares, strict=True)]
    return {**intent, "backends": backends, "unrouted_pct": unrouted}


def _shared(rows: list[dict[str, Any]], count: str) -> list[dict[str, Any]]:
    """Rows with ``share_pct``: their ``count`` in whole percents adding up to 100."""
    shares = whole_percents([row[count] for row in rows])
    return [{**row, "share_pct": s} for row, s in zip(rows, shares, strict=True)]


@page
def analytics_page(request: HttpRequest) -> HttpResponse:
    """Backends compared per intent over a range: table, charts, traffic, health."""
    scope = _scope(request)
    filters = _filters(request, scope)
    since = timezone.now() - RANGES[filters["range"]]
    read = overview(tenant=scope.tenant, since=since, intent=filters["intent"])
    window, by_intent, traffic = read["window"], read["by_intent"], read["timeseries"]
    health = health_timeline(tenant=scope.tenant, window=window)
    query = {k: v for k, v in {**filters, "since": since.isoformat()}.items() if v}
    csv = {k: v for k, v in query.items() if k != "range"}
    intents = [_with_shares(i) for i in by_intent["intents"]]
    palette = charts.colours(
        [s["backend"] for s in traffic["backends"]]
        + [b["backend"] for i in intents for b in i["backends"]]
    )
    classification = classification_summary(tenant=scope.tenant, since=since)
    splits = split_arms(tenant=scope.tenant, since=since, intent=filters["intent"])
    context = {
        "scope": scope,
        "filters": filters,
        "ranges": list(RANGES),
        "intents": list(Intent.objects.filter(enabled=True).values_list("slug", flat=True)),
        "data": by_intent,
        "intent_rows": intents,
        "comparison_chart": charts.comparison_chart(intents, palette),
        "traffic_chart": charts.traffic_chart(
            traffic["backends"],
            start=window.start,
            end=window.end,
            step=STEP[window.granularity],
            palette=palette,
        ),
        "traffic": traffic["backends"],
        "legend": list(palette.items()),
        "health_chart": charts.health_chart(
            health["backends"], start=window.start, end=window.end, step=STEP[window.granularity]
        ),
        "csv_query": urlencode({**csv, "format": "csv"}),
        "classification": {
            **classification,
            "methods": _shared(classification["methods"], "decisions"),
        },
        "splits": {
            **splits,
            "intents": [{**i, "arms": _shared(i["arms"], "questions")} for i in splits["intents"]],
        },
    }
    return render(request, "pages/analytics.html", context)


@page
def decisions_page(request: HttpRequest) -> HttpResponse:
    """Decisions, newest first, filtered by intent, outcome, backend and session."""
    scope = _scope(request)
    params = {k: request.GET.get(k) or None for k in ("intent", "outcome", "backend", "session")}
    decisions = decisions_for(
        scope.tenant,
        intent=params["intent"],
        outcome=params["outcome"],
        backend=params["backend"],
        session_id=params["session"],
    ).select_related("tenant")
    current = _page_of(decisions, request.GET.get("page"))
    kept = {k: v for k, v in {**params, "tenant": request.GET.get("tenant")}.items() if v}
    context = {
        "scope": scope,
        "page": current,
        "params": params,
        "kept_query": urlencode(kept),
        "outcomes": Outcome.choices,
        "intents": list(Intent.objects.values_list("slug", flat=True)),
    }
    return render(request, "pages/decisions.html", context)


@dataclass(frozen=True)
class DecisionsPage:
    """One page of decisions, newest first, without counting them all: a count over
    a million rows with a filter would cost more than the page itself."""

    rows: list[RoutingDecision]
    number: int
    has_next: bool

    @property
    def has_previous(self) -> bool:
        return self.number > 1

    @property
    def previous_page_number(self) -> int:
        return self.number - 1

    @property
    def next_page_number(self) -> int:
        return self.number + 1

    def __iter__(self) -> Iterator[RoutingDecision]:
        return iter(self.rows)


def _page_of(decisions: QuerySet[RoutingDecision], asked: str | None) -> DecisionsPage:
    number = int(asked) if asked and asked.isascii() and asked.isdigit() else 1
    number = min(max(number, 1), MAX_PAGE)
    start = (number - 1) * DECISIONS_PER_PAGE
    rows = list(decisions[start : start + DECISIONS_PER_PAGE + 1])
    more = len(rows) > DECISIONS_PER_PAGE and number < MAX_PAGE
    return DecisionsPage(rows[:DECISIONS_PER_PAGE], number, more)


@page
def decision_trace(request: HttpRequest, request_id: uuid.UUID) -> HttpResponse:
    """Everything routing knew and did for one query."""
    decision = decision_for(scope_for_user(request.user), request_id)
    context = {"decision": decision, "story": decision_story(decision)}
    return render(request, "analytics/decision_trace.html", context)


@page
def session_page(request: HttpRequest, session_id: uuid.UUID) -> HttpResponse:
    """Seed 002's visualisation: each turn of a session and how it was routed."""
    found = session_visualization(scope=scope_for_user(request.user), session_id=session_id)
    acting = tenant_for_user(request.user)  # the chat continues only one's own conversations
    own = acting is not None and acting.slug == found["tenant"]
    return render(request, "pages/session.html", {"session": found, "own": own})

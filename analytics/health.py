"""A health timeline per backend: its probes (backends.HealthCheck) per bucket."""

from __future__ import annotations

from collections import defaultdict
from datetime import UTC, datetime
from typing import Any

from django.db.models import Avg, Count, Q
from django.db.models.functions import Trunc

from analytics.reads import Window, window_of
from backends.models import Backend, HealthCheck
from backends.selectors import backends_visible_to
from flywheel.models import Tenant


def _visible(tenant: Tenant | None) -> list[Backend]:
    if tenant is None:
        return list(Backend.objects.order_by("name", "id"))
    return list(backends_visible_to(tenant))


def health_timeline(
    *,
    tenant: Tenant | None,
    since: str | datetime | None = None,
    until: str | datetime | None = None,
    window: Window | None = None,
) -> dict[str, Any]:
    """Per visible backend, its buckets with probes: how many, how many answered, and
    their mean latency, plus ``state`` (up, down or mixed). Raises ValidationError
    naming ``since`` or ``until``."""
    window = window or window_of(since, until)
    backends = _visible(tenant)
    rows = (
        HealthCheck.objects.filter(
            backend__in=[b.pk for b in backends],
            checked_at__gte=window.start,
            checked_at__lt=window.end,
        )
        .annotate(bucket=Trunc("checked_at", window.granularity, tzinfo=UTC))
        .values("backend_id", "bucket")
        .order_by("backend_id", "bucket")
        .annotate(checks=Count("pk"), ok=Count("pk", filter=Q(ok=True)), latency=Avg("latency_ms"))
    )
    buckets: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        state = "up" if row["ok"] == row["checks"] else "down" if not row["ok"] else "mixed"
        latency = row["latency"]
        buckets[row["backend_id"]].append(
            {
                "start": row["bucket"],
                "checks": row["checks"],
                "ok": row["ok"],
                "state": state,
                "mean_latency_ms": None if latency is None else round(latency, 1),
            }
        )
    return {
        "since": window.start,
        "until": window.end,
        "granularity": window.granularity,
        "backends": [{"backend": b.name, "buckets": buckets.get(b.pk, [])} for b in backends],
    }

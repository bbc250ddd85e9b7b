"""Each backend's health and breaker, read from the database when Prometheus scrapes."""

from __future__ import annotations

from collections.abc import Iterable

from django.utils import timezone
from prometheus_client.core import GaugeMetricFamily, Metric

from backends.models import Backend
from flywheel.metrics import BACKEND_LABELS, backend_labels


def backend_states() -> Iterable[Metric]:
    """Per enabled backend: healthy (1/0), in cooldown (the breaker open, 1/0) and
    awaiting its trial query (half-open, 1/0); each series labelled by the backend's
    id, owner and name (flywheel.metrics.BACKEND_LABELS)."""
    healthy = GaugeMetricFamily(
        "flywheel_backend_healthy",
        "Whether the last probe of the backend passed.",
        labels=BACKEND_LABELS,
    )
    cooldown = GaugeMetricFamily(
        "flywheel_backend_cooldown",
        "Whether the backend is in cooldown: its breaker is open and routing passes it by.",
        labels=BACKEND_LABELS,
    )
    trial = GaugeMetricFamily(
        "flywheel_backend_awaiting_trial",
        "Whether the backend's breaker is half-open: one query may try it.",
        labels=BACKEND_LABELS,
    )
    now = timezone.now()
    for backend in Backend.objects.filter(enabled=True).select_related("health"):
        health = getattr(backend, "health", None)
        cooling = bool(health and health.cooldown_until and health.cooldown_until > now)
        labels = backend_labels(backend.pk, backend.tenant_id, backend.name)
        healthy.add_metric(labels, 1.0 if health and health.healthy else 0.0)
        cooldown.add_metric(labels, 1.0 if cooling else 0.0)
        trial.add_metric(labels, 1.0 if health and health.needs_trial else 0.0)
    return [healthy, cooldown, trial]

"""Prometheus metrics, served at /metrics (flywheel.views.metrics).

The counters live here, in the base app; the code that sees each event
increments them: the ASGI entry point (requests by door and status), the
decision writer (decisions, fallbacks, backend latency, its backlog) and the
rate limiter (refusals). State that lives in the database (each backend's
health and breaker) is read when Prometheus scrapes, by collectors the apps
register (``register_collector``), so this module imports no app above it.

With several processes (uvicorn ``--workers``, the Celery worker) set
PROMETHEUS_MULTIPROC_DIR to a directory they share, emptied before they start
(`make run` does): each process writes its counts there and a scrape sums them
(prometheus_client's multiprocess mode). Without it, a scrape sees the counts
of the process that answers it.
"""

from __future__ import annotations

import functools
import logging
import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
    multiprocess,
)
from prometheus_client.core import Metric

# A backend's series are keyed by its id and owner, never by its name alone: names are
# unique per owner only, so a tenant's backend may bear a shared one's name, and its
# series must not pass for the shared one's. The name is there to be read.
BACKEND_LABELS = ("backend_id", "owner", "backend")
SHARED = "shared"  # the owner of a backend that serves every tenant
NO_BACKEND = ("none", "none", "none")  # a decision no backend answered


def backend_labels(backend_id: int, tenant_id: int | None, name: str) -> tuple[str, str, str]:
    """The values of BACKEND_LABELS for a backend: its id, its owning tenant's id (or
    ``shared``) and its name."""
    return str(backend_id), SHARED if tenant_id is None else str(tenant_id), name


REQUESTS = Counter(
    "flywheel_requests_total", "HTTP requests answered, by door and status.", ["door", "status"]
)
DECISIONS = Counter(
    "flywheel_decisions_total",
    "Routing decisions, by the backend that answered (none), intent, method and outcome.",
    [*BACKEND_LABELS, "intent", "method", "outcome"],
)
FALLBACKS = Counter(
    "flywheel_fallbacks_total", "Questions answered after a failed attempt, by intent.", ["intent"]
)
BACKEND_LATENCY = Histogram(
    "flywheel_backend_latency_seconds",
    "Attempts on backends, by backend and result (ok or failed).",
    [*BACKEND_LABELS, "result"],
    buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60),
)
WRITER_BACKLOG = Gauge(
    "flywheel_decision_writer_backlog",
    "Decisions answered but not yet written to the database, summed over processes.",
    multiprocess_mode="livesum",
)
WRITER_MEMORY = Gauge(
    "flywheel_decision_writer_memory_bytes",
    "The part of the writer's backlog held in memory, by its spooled size, summed over "
    "processes; past FLYWHEEL_WRITER_MEMORY_MB a process spills to the spool alone.",
    multiprocess_mode="livesum",
)
SPOOL_REFUSED = Counter(
    "flywheel_spool_refused_total",
    "Decisions the spool could not take (a full or read-only disk), by what became of "
    "them: stored_now (written to the database before the answer), queued (kept in "
    "memory until written), refused (the question was answered 503), dropped (not "
    "recorded: memory was full too, and the question was not refused).",
    ["fate"],
)
RATE_LIMITED = Counter(
    "flywheel_rate_limited_total", "Requests refused by a rate limit, by limit.", ["limit"]
)
# Series whose labels are known before the first event show from the start, at 0.
for _limit in ("key", "auth-failures"):
    RATE_LIMITED.labels(_limit)
for _fate in ("stored_now", "queued", "refused", "dropped"):
    SPOOL_REFUSED.labels(_fate)

logger = logging.getLogger(__name__)

Collect = Callable[[], Iterable[Metric]]
_collectors: list[Collect] = []


class _Scraped:
    """A collector that reads its metrics when Prometheus scrapes."""

    def __init__(self, collect: Collect) -> None:
        self._collect = collect

    def collect(self) -> Iterable[Metric]:
        try:
            return list(self._collect())
        except Exception as err:  # the database down: the process's own counts still answer
            logger.warning("Metrics: %s failed: %s", self._collect.__name__, type(err).__name__)
            return []


def register_collector(collect: Collect) -> None:
    """Add metrics read at scrape time (an app's AppConfig.ready calls this once)."""
    _collectors.append(collect)


@functools.lru_cache(maxsize=4096)
def labelled(metric: Any, *values: str) -> Any:
    """``metric.labels(*values)``, remembered: prometheus_client checks and joins the
    labels on every call, about 5 µs, and the query path counts on every request."""
    return metric.labels(*values)


def door_of(path: str) -> str:
    """Which door a request came through, by its path."""
    if path.startswith("/api/"):
        return "rest"
    if path.startswith("/v1/"):
        return "openai"
    if path.startswith("/compat/"):
        return "compat"
    if path.startswith("/admin/"):
        return "admin"
    if path.startswith("/static/"):
        return "static"
    if path in ("/healthz", "/readyz", "/metrics"):
        return "probe"
    return "pages"


def forget_dead_processes(directory: str) -> list[int]:
    """Remove the live gauges (``livesum``, ``liveall``...) of processes that are gone
    (killed, or stopped without saying so): else a killed worker's last backlog would
    count for ever. Returns their process ids."""
    dead = []
    for path in Path(directory).glob("gauge_live*_*.db"):
        try:
            pid = int(path.stem.rsplit("_", 1)[1])
            os.kill(pid, 0)
        except ValueError:  # not a file of prometheus_client's naming
            continue
        except ProcessLookupError:
            dead.append(pid)
        except PermissionError:  # alive, another user's
            continue
    for pid in set(dead):
        multiprocess.mark_process_dead(pid, directory)
    return sorted(set(dead))


def exposition() -> tuple[bytes, str]:
    """The metrics in Prometheus' text format, and its content type."""
    if directory := os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        forget_dead_processes(directory)
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)
    else:
        registry = REGISTRY
    scraped = CollectorRegistry()
    for collect in _collectors:
        scraped.register(_Scraped(collect))
    return generate_latest(registry) + generate_latest(scraped), CONTENT_TYPE_LATEST

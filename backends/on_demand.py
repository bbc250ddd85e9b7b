"""Who may probe or discover a backend on demand, and how often.

Scheduled probes (Celery beat) and real traffic move a backend's health; a
person asking for a probe now is a door that could be hammered. A tenant may
ask only about its own backends (a shared backend is everyone's: three probes
by one tenant during a blip would put it in cooldown for all), and each
backend answers one on-demand probe per HEALTH_CHECK_SECONDS and one
discovery per DISCOVERY_SECONDS, counted across every process in the shared
cache. Staff (the admin) may act on any backend, within the same limits;
management commands are operators' tools and are not limited.

``on_demand_run`` is the one way a door runs an operation on demand, whichever
app owns the operation (health here, discovery in chatflows).
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

from backends.adapters import run_sync
from backends.errors import BackendError
from backends.models import Backend
from flywheel.cache import shared_cache
from flywheel.errors import ApplicationError, PermissionDeniedError, RateLimitError
from flywheel.models import Tenant

T = TypeVar("T")

HEALTH_CHECK = "health-check"
DISCOVERY = "discover"
HEALTH_CHECK_SECONDS = 10
DISCOVERY_SECONDS = 30
INTERVALS = {HEALTH_CHECK: HEALTH_CHECK_SECONDS, DISCOVERY: DISCOVERY_SECONDS}
KEY = "flywheel:on-demand:{operation}:{backend}"

logger = logging.getLogger(__name__)


def on_demand_admit(*, backend: Backend, tenant: Tenant | None, operation: str) -> None:
    """Let one on-demand ``operation`` (HEALTH_CHECK or DISCOVERY) of ``backend`` start now.

    ``tenant`` is the REST caller's; None means staff. Raises
    PermissionDeniedError when a tenant asks about a backend it does not own,
    and RateLimitError (``retry_after`` seconds) when the backend already ran
    one within its interval.
    """
    if tenant is not None and backend.tenant_id != tenant.pk:
        raise PermissionDeniedError(
            "Only the backend's owner or an administrator may run this on demand: "
            "shared backends are checked on a schedule.",
            details={"id": backend.pk, "operation": operation},
        )
    seconds = INTERVALS[operation]
    wait = _claim(KEY.format(operation=operation, backend=backend.pk), seconds)
    if wait:
        raise RateLimitError(
            f"This backend ran an on-demand {operation} less than {seconds} s ago; "
            f"try again in {wait} s.",
            retry_after=wait,
            details={"id": backend.pk, "operation": operation},
        )


def on_demand_run(
    *,
    backends: Sequence[Backend],
    tenant: Tenant | None,
    operation: str,
    run: Callable[[list[Backend]], Awaitable[list[T | BackendError]]],
) -> list[T | ApplicationError]:
    """Run ``operation`` now on the ``backends`` admitted (on_demand_admit), in one ``run``.

    Returns one slot per backend, in order: what ``run`` gave for it, or the
    PermissionDeniedError or RateLimitError that kept it out.
    """
    slots: list[ApplicationError | None] = []
    admitted: list[Backend] = []
    for backend in backends:
        try:
            on_demand_admit(backend=backend, tenant=tenant, operation=operation)
        except ApplicationError as err:
            slots.append(err)
            continue
        slots.append(None)
        admitted.append(backend)
    results = iter(run_sync(run, admitted) if admitted else [])
    return [next(results) if slot is None else slot for slot in slots]


def _claim(key: str, seconds: int) -> int:
    """Take the slot under ``key`` for ``seconds``; 0 when taken, else the seconds to wait."""
    cache = shared_cache()
    until = time.time() + seconds
    try:
        if cache.add(key, until, timeout=seconds):  # atomic on Redis (SET NX)
            return 0
        held = cache.get(key)
    except Exception:  # the cache is down: let people probe rather than lock them out
        logger.warning("on-demand limit not applied: the shared cache failed", exc_info=True)
        return 0
    if not isinstance(held, int | float):
        return 1  # expired between add and get: the slot is free again in a moment
    return max(1, min(seconds, math.ceil(held - time.time())))

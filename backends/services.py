"""Backend services: registering backends and checking their health.

Every door (admin, REST, commands, Celery) calls these. Functions named
``a…`` are async and reach the database through sync_to_async.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, TypeVar

from asgiref.sync import sync_to_async
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import transaction
from django.utils import timezone

from backends import snapshot
from backends.adapters import get_adapter
from backends.adapters.base import BackendConfig, HealthResult
from backends.errors import BackendError
from backends.models import Backend, BackendHealth, HealthCheck
from flywheel.errors import ValidationError
from flywheel.models import Tenant

logger = logging.getLogger(__name__)

T = TypeVar("T")
# How many backends are probed or discovered at once.
DEFAULT_CONCURRENCY = 8
EDITABLE_FIELDS = ("name", "kind", "base_url", "api_key", "enabled", "timeout_seconds", "weight")


def backend_config(backend: Backend) -> BackendConfig:
    return BackendConfig(
        id=backend.pk,
        name=backend.name,
        kind=backend.kind,
        base_url=backend.base_url,
        api_key=backend.api_key,
        timeout_seconds=backend.timeout_seconds,
    )


def _validated_save(backend: Backend) -> Backend:
    try:
        backend.full_clean()
    except DjangoValidationError as err:
        raise ValidationError(
            "The backend is not valid.", details={"fields": err.message_dict}
        ) from err
    backend.save()
    return backend


def backend_create(
    *, name: str, kind: str, base_url: str, tenant: Tenant | None = None, **fields: Any
) -> Backend:
    """Register a backend. Raises ValidationError naming the bad fields."""
    unknown = set(fields) - set(EDITABLE_FIELDS)
    if unknown:
        raise ValidationError(f"Unknown backend fields: {', '.join(sorted(unknown))}.")
    return _validated_save(
        Backend(name=name, kind=kind, base_url=base_url, tenant=tenant, **fields)
    )


def backend_update(*, backend: Backend, **fields: Any) -> Backend:
    """Change a backend's settings. Raises ValidationError naming the bad fields."""
    unknown = set(fields) - set(EDITABLE_FIELDS)
    if unknown:
        raise ValidationError(f"Unknown backend fields: {', '.join(sorted(unknown))}.")
    for field, value in fields.items():
        setattr(backend, field, value)
    return _validated_save(backend)


def backend_delete(*, backend: Backend) -> None:
    """Delete a backend; its decisions keep their rows (the link is cleared)."""
    backend.delete()


# --- health -------------------------------------------------------------------


@dataclass(frozen=True)
class HealthOutcome:
    backend: str
    ok: bool
    latency_ms: float | None
    error: str
    in_cooldown: bool


@transaction.atomic
def health_record(*, backend: Backend, result: HealthResult) -> HealthOutcome:
    """Store one probe: a HealthCheck row plus the backend's current health.

    After ``cooldown_failures`` consecutive failures (policy) the backend is put
    in cooldown, extended while it keeps failing; a good probe once the
    cooldown has passed closes it.
    """
    from routing.services import routing_policy_get

    policy = routing_policy_get()
    now = timezone.now()
    HealthCheck.objects.create(
        backend=backend, ok=result.ok, latency_ms=result.latency_ms, error=result.error
    )
    health, _ = BackendHealth.objects.select_for_update().get_or_create(backend=backend)
    health.healthy = result.ok
    health.last_checked_at = now
    health.latency_ms = result.latency_ms
    if result.ok:
        health.consecutive_failures = 0
        health.last_error = ""
        if health.cooldown_until and health.cooldown_until <= now:
            health.cooldown_until = None
    else:
        health.consecutive_failures += 1
        health.last_error = result.error
        if health.consecutive_failures >= policy.cooldown_failures:
            health.cooldown_until = now + timedelta(seconds=policy.cooldown_seconds)
    health.save()
    return HealthOutcome(
        backend=backend.name,
        ok=result.ok,
        latency_ms=result.latency_ms,
        error=result.error,
        in_cooldown=bool(health.cooldown_until and health.cooldown_until > now),
    )


async def ahealth_check(backend: Backend) -> HealthOutcome:
    """Probe one backend, store the result and publish health for routing."""
    result = await get_adapter(backend_config(backend)).health_check()
    outcome = await sync_to_async(health_record)(backend=backend, result=result)
    await sync_to_async(snapshot.publish_health)()
    return outcome


async def ahealth_check_all(
    backends: Iterable[Backend] | None = None, *, concurrency: int = DEFAULT_CONCURRENCY
) -> list[HealthOutcome | BackendError]:
    """Probe every enabled backend (or those given) concurrently, with a bound.

    One backend's failure never stops the others: each slot holds an outcome
    or the error that prevented one.
    """
    if backends is None:
        backends = [b async for b in Backend.objects.filter(enabled=True)]
    return await gather_bounded(list(backends), ahealth_check, concurrency)


async def gather_bounded(
    items: Sequence[Backend],
    work: Callable[[Backend], Awaitable[T]],
    concurrency: int,
) -> list[T | BackendError]:
    """Run ``work`` on every item, at most ``concurrency`` at a time, keeping order."""
    semaphore = asyncio.Semaphore(concurrency)

    async def one(item: Backend) -> T | BackendError:
        async with semaphore:
            try:
                return await work(item)
            except BackendError as err:
                logger.warning("backend %s: %s", item.name, err.message)
                return err
            except Exception as err:  # a bug for one backend must not stop the rest
                logger.exception("backend %s failed unexpectedly", item.name)
                return BackendError(f"{type(err).__name__}: {err}", backend=item.name)

    return list(await asyncio.gather(*(one(item) for item in items)))

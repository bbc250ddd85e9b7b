"""Backend services: registering backends and checking their health.

Every door (admin, REST, commands, Celery) calls these. Functions named
``a…`` are async and reach the database through sync_to_async.
"""

from __future__ import annotations

import asyncio
import logging
import shlex
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, TypeVar

from asgiref.sync import sync_to_async
from django.conf import settings
from django.core.exceptions import NON_FIELD_ERRORS
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import IntegrityError, transaction
from django.dispatch import Signal
from django.utils import timezone

from backends import snapshot
from backends.adapters import get_adapter, run_sync
from backends.adapters.base import BackendConfig, HealthResult
from backends.addresses import url_problem
from backends.errors import BackendError
from backends.models import Backend, BackendHealth, HealthCheck
from backends.on_demand import HEALTH_CHECK, on_demand_run
from backends.policy import health_policy
from flywheel.errors import ApplicationError, ConflictError, ValidationError
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
        allow_private_addresses=backend.allow_private_addresses,
    )


def _refuse_unknown(fields: dict[str, Any]) -> None:
    unknown = sorted(set(fields) - set(EDITABLE_FIELDS))
    if unknown:
        raise ValidationError(
            f"Unknown backend fields: {', '.join(unknown)}.",
            details={"fields": {name: ["Unknown field."] for name in unknown}},
        )


DUPLICATE_NAME = "duplicate_name"  # the code of both name constraints (backends/models.py)


def _duplicate_name(backend: Backend) -> ConflictError:
    owner = "You already have" if backend.tenant_id else "There is already a shared"
    return ConflictError(
        f"{owner} backend named {backend.name!r}.",
        details={"fields": {"name": ["A backend with this name already exists."]}},
    )


def _validated_save(backend: Backend, *, check_address: bool) -> Backend:
    """Validate (fields, constraints, and where the URL points when ``check_address``)
    and save. Raises ConflictError when the owner already has a backend of that
    name, else ValidationError naming every bad field."""
    errors: dict[str, list[str]] = {}
    try:
        backend.full_clean()
    except DjangoValidationError as err:
        codes = {e.code for e in err.error_dict.get(NON_FIELD_ERRORS, [])}
        if DUPLICATE_NAME in codes and len(err.error_dict) == 1:
            raise _duplicate_name(backend) from err
        errors = dict(err.message_dict)
    if check_address and "base_url" not in errors:
        problem = url_problem(backend.base_url)  # resolves the host: blocking, sync code only
        if problem:
            errors["base_url"] = [problem]
    if errors:
        raise ValidationError("The backend is not valid.", details={"fields": errors})
    try:
        with transaction.atomic():
            backend.save()
    except IntegrityError as err:  # a concurrent save took the name after full_clean looked
        raise _duplicate_name(backend) from err
    return backend


def backend_create(
    *,
    name: str,
    kind: str,
    base_url: str,
    tenant: Tenant | None = None,
    trusted: bool = False,
    **fields: Any,
) -> Backend:
    """Register a backend owned by ``tenant`` (None: shared).

    ``trusted`` is for staff doors (admin, management commands): the backend
    may reach private addresses. Otherwise (a tenant's API key) it may not, and
    its host is resolved and checked before saving (backends/addresses.py).
    Raises ValidationError naming the bad fields.
    """
    _refuse_unknown(fields)
    backend = Backend(
        name=name,
        kind=kind,
        base_url=base_url,
        tenant=tenant,
        allow_private_addresses=trusted,
        **fields,
    )
    return _validated_save(backend, check_address=not trusted)


def backend_update(*, backend: Backend, trusted: bool = False, **fields: Any) -> Backend:
    """Change a backend's settings; its owner never changes.

    ``trusted`` (staff doors) lets the backend reach private addresses. An
    untrusted caller (a tenant's key) that points it at another URL has the new
    host checked, loses that allowance, and loses the stored API key unless it
    sends one: a key goes only to the server it was given for.
    Raises ValidationError naming the bad fields (``tenant`` among them).
    """
    if "tenant" in fields:
        raise ValidationError(
            "A backend's owner cannot change.",
            details={"fields": {"tenant": ["A backend's owner cannot change."]}},
        )
    _refuse_unknown(fields)
    moved = "base_url" in fields and fields["base_url"] != backend.base_url
    for field, value in fields.items():
        setattr(backend, field, value)
    if trusted:
        backend.allow_private_addresses = True
    elif moved:
        backend.allow_private_addresses = False
        if "api_key" not in fields:
            backend.api_key = ""
    return _validated_save(backend, check_address=moved and not trusted)


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

    After ``cooldown_failures`` consecutive failures (health_policy) the backend is put
    in cooldown, extended while it keeps failing; a good probe once the
    cooldown has passed closes it.
    """
    policy = health_policy()
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


def health_trip(*, backend_id: int, reason: str) -> bool:
    """Open the breaker: failed traffic puts the backend in cooldown for the policy's
    ``cooldown_seconds``, after which one query tries it (``needs_trial``) before it
    takes its whole share. False when it is in cooldown already (or gone)."""
    now = timezone.now()
    until = now + timedelta(seconds=health_policy().cooldown_seconds)
    with transaction.atomic():
        if not Backend.objects.filter(pk=backend_id).exists():
            return False
        health, _ = BackendHealth.objects.select_for_update().get_or_create(backend_id=backend_id)
        if health.cooldown_until and health.cooldown_until > now:
            return False
        health.cooldown_until, health.needs_trial = until, True
        health.last_error = reason
        health.save(update_fields=["cooldown_until", "needs_trial", "last_error"])
    snapshot.publish_health()
    return True


def health_trial_passed(*, backend_id: int) -> bool:
    """Close the breaker: the trial query was answered, the backend takes its share again."""
    closed = BackendHealth.objects.filter(backend_id=backend_id, needs_trial=True).update(
        needs_trial=False, cooldown_until=None, last_error=""
    )
    if closed:
        snapshot.publish_health()
    return bool(closed)


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
                # The exception's text stays in the log: it may quote what a backend sent.
                return BackendError(
                    f"Flywheel failed on backend {item.name!r} ({type(err).__name__}); "
                    "the error was logged.",
                    backend=item.name,
                )

    return list(await asyncio.gather(*(one(item) for item in items)))


# --- a new backend, ready at once -----------------------------------------------

# Sent by backend_onboard once a new backend has been probed, so the apps above learn
# of it at once (chatflows discovers its flows). Arguments: ``backend`` and ``healthy``
# (its probe's verdict). A receiver returns a dict of what it found, merged into the
# onboarding report.
backend_added = Signal()


def backend_onboard(*, backend: Backend) -> dict[str, Any]:
    """Make a newly registered ``backend`` usable now, without beat or a worker: probe
    its health (stored and published for routing), then let the apps above learn of it
    (chatflows discovers and publishes its flows). Returns what was found::

        {"health": {"ok", "latency_ms", "error", "in_cooldown"}, "flows": {...}}

    Never raises for the backend's own failures: it is registered either way, and the
    report says what went wrong (beat keeps probing it every minute). With
    ONBOARD_NEW_BACKENDS off, does nothing and says so (``{"health": None}``)."""
    if not settings.ONBOARD_NEW_BACKENDS:
        return {"health": None}
    try:
        outcome = run_sync(ahealth_check, backend)
        health: dict[str, Any] = {
            "ok": outcome.ok,
            "latency_ms": outcome.latency_ms,
            "error": outcome.error,
            "in_cooldown": outcome.in_cooldown,
        }
    except BackendError as err:
        health = {"ok": False, "latency_ms": None, "error": err.message, "in_cooldown": False}
    report: dict[str, Any] = {"health": health}
    for receiver_, found in backend_added.send_robust(
        sender=Backend, backend=backend, healthy=health["ok"]
    ):
        if isinstance(found, Exception):
            logger.error("Onboarding backend %s: %s failed: %r", backend.name, receiver_, found)
        elif found:
            report.update(found)
    return report


def onboarding_lines(report: dict[str, Any], *, backend: Backend) -> list[str]:
    """backend_onboard's report on ``backend`` in words, for a person (the command, the
    admin): its next step as a command to paste, owner included."""
    health = report["health"]
    if health is None:
        return ["Not probed now (FLYWHEEL_ONBOARD_NEW_BACKENDS is off): beat will."]
    if health["ok"]:
        lines = [f"Health: answering ({health['latency_ms']:.0f} ms)."]
    else:
        lines = [f"Health: not answering: {health['error']} Beat keeps probing it."]
    flows = report.get("flows")
    if flows is None:
        return lines
    if not flows["discovered"]:
        lines.append(f"Flows: not discovered: {flows['error']}")
    elif flows["routable"]:
        lines.append(
            f"Flows: {flows['total']} found ({flows['added']} new), {flows['routable']} "
            "serving an intent or any question: it can answer now."
        )
    elif flows["total"]:
        lines.append(
            f"Flows: {flows['total']} found ({flows['added']} new), but none serves an intent "
            "yet: in the admin (Flows), tick 'generic' on one or add intents to its keywords, "
            "or run: .venv/bin/python manage.py set_flow FLOW --backend "
            + shlex.quote(backend.name)
            + (f" --tenant {backend.tenant.slug}" if backend.tenant is not None else "")
            + " --generic"
        )
    else:
        lines.append("Flows: none found yet; beat looks again every minute (its default).")
    listed = flows.get("listed") or []
    lines += [f"  - {_flow_line(flow)}" for flow in listed]
    if flows.get("total", 0) > len(listed) and listed:
        lines.append(f"  and {flows['total'] - len(listed)} more (GET /api/v1/flows).")
    return lines


def _flow_line(flow: dict[str, Any]) -> str:
    """One discovered flow in words: its name, and what routing sends it."""
    if not flow["deployed"]:
        serves = "not deployed: it answers nothing until it is"
    elif flow["serves"]:
        serves = (
            "serves " + ", ".join(flow["serves"]) + (" and any question" if flow["generic"] else "")
        )
    elif flow["generic"]:
        serves = "serves any question (generic)"
    else:
        serves = "serves no intent yet"
    return f"{flow['name']}: {serves}"


# --- on demand (a person asked, not the schedule) ------------------------------


def backends_health_check_now(
    *, backends: Sequence[Backend], tenant: Tenant | None = None
) -> list[HealthOutcome | ApplicationError]:
    """Probe backends now for a person: REST (``tenant``, the caller's) or the admin (None).

    Each slot holds the outcome or the error that stopped it:
    PermissionDeniedError or RateLimitError (backends/on_demand.py), or a BackendError.
    """
    return on_demand_run(
        backends=backends, tenant=tenant, operation=HEALTH_CHECK, run=ahealth_check_all
    )

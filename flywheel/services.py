"""Services for tenants and API keys: every door (admin, CLI, API) calls these."""

from __future__ import annotations

import hashlib
import hmac
import logging
import secrets
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta
from typing import Any

from django.db import connections, transaction
from django.utils import timezone

from flywheel.cache import forget, shared_cache
from flywheel.env import as_rate
from flywheel.errors import (
    DATABASE_UNAVAILABLE,
    AuthenticationError,
    PermissionDeniedError,
    ValidationError,
)
from flywheel.models import ApiKey, Membership, Tenant
from flywheel.ratelimit import address_admit, address_failure_note, describe

logger = logging.getLogger(__name__)
KEY_SCHEME = "fw"
# Authenticated keys are remembered in the shared cache for this long, so a
# request costs no database read; revoking or editing a key forgets it at once. A key
# in use is written back each LAST_USED_RESOLUTION (as its use is noted), so it stays
# for as long as it is used, through a database outage of any length; it must outlive
# that interval by far (when they were equal, a key in constant use expired just as it
# was due to be written back, and stopped authenticating a minute into an outage).
AUTH_CACHE_KEY = "flywheel:apikey:{digest}"
AUTH_CACHE_SECONDS = 15 * 60
# Each process also keeps the keys it recalled for this long, which spares a
# shared-cache round trip per request; a revoke shows at once in the process
# that made it and within this time in every other.
KEY_MEMO_SECONDS = 0.5  # half the second a revocation takes to reach every process
KEY_MEMO_MAX = 10_000
_key_memo: dict[str, tuple[float, ApiKey]] = {}
DEFAULT_TENANT_SLUG = "default"
# last_used_at is bookkeeping, not an audit log: refresh it at most this often
# so that authenticating a request does not cost a write every time.
LAST_USED_RESOLUTION = timedelta(minutes=1)


def hash_api_key(raw_key: str) -> str:
    return hashlib.sha256(raw_key.encode()).hexdigest()


def tenant_get_or_create_default() -> Tenant:
    """Return the tenant that owns work done without an API key (CLI, first run)."""
    tenant, _ = Tenant.objects.get_or_create(slug=DEFAULT_TENANT_SLUG, defaults={"name": "Default"})
    return tenant


def tenant_for_user(user: Any) -> Tenant | None:
    """The tenant a logged-in person acts for on the web pages: their membership's; a
    superuser without one acts for the default tenant; anyone else for none (None)."""
    if not getattr(user, "is_authenticated", False):
        return None
    membership = (
        Membership.objects.select_related("tenant")
        .filter(user=user, tenant__is_active=True)
        .first()
    )
    if membership is not None:
        return membership.tenant
    return tenant_get_or_create_default() if user.is_superuser else None


def tenant_acted_for(user: Any) -> Tenant:
    """As tenant_for_user, but raises PermissionDeniedError (saying how to fix it) when
    the person acts for no tenant."""
    tenant = tenant_for_user(user)
    if tenant is None:
        raise PermissionDeniedError(
            "Your account acts for no tenant yet: an administrator can link it to one "
            "(admin, Flywheel, Memberships)."
        )
    return tenant


def _rate_limit_text(rate_limit: str) -> str:
    """``rate_limit`` in one spelling ("600/minute", "off", or blank for the default).

    Raises ValidationError naming the field when it is not a rate.
    """
    if not rate_limit.strip():
        return ""
    try:
        rate = as_rate(rate_limit)
    except ValueError as err:
        raise ValidationError(
            f"Not a rate: {rate_limit[:40]!r} ({err}).", details={"field": "rate_limit"}
        ) from err
    return "off" if rate is None else describe(rate)


def api_key_create(*, tenant: Tenant, name: str, rate_limit: str = "") -> tuple[ApiKey, str]:
    """Create a key for ``tenant``; return the row and the raw key (shown only now).

    ``rate_limit`` is the key's own limit ("600/minute", "off"); blank: the
    server's FLYWHEEL_RATE_LIMIT. Raises ValidationError for a blank name, a
    bad rate or an inactive tenant.
    """
    rate_limit = _rate_limit_text(rate_limit)
    name = name.strip()
    if not name:
        raise ValidationError("An API key needs a name.", details={"field": "name"})
    if not tenant.is_active:
        raise ValidationError(
            f"Tenant {tenant.slug!r} is inactive.", details={"tenant": tenant.slug}
        )
    prefix = secrets.token_hex(4)
    raw_key = f"{KEY_SCHEME}_{prefix}_{secrets.token_urlsafe(32)}"
    api_key = ApiKey.objects.create(
        tenant=tenant,
        name=name,
        prefix=prefix,
        hashed_key=hash_api_key(raw_key),
        rate_limit=rate_limit,
    )
    return api_key, raw_key


def api_key_set_rate_limit(*, api_key: ApiKey, rate_limit: str) -> ApiKey:
    """Give ``api_key`` its own rate limit ("600/minute", "off"; blank: the default).

    Every process applies it within KEY_MEMO_SECONDS. Raises ValidationError
    when ``rate_limit`` is not a rate.
    """
    api_key.rate_limit = _rate_limit_text(rate_limit)
    ApiKey.objects.filter(pk=api_key.pk).update(rate_limit=api_key.rate_limit)
    api_key_forget(api_key.hashed_key)
    return api_key


def _remembered(api_key: ApiKey) -> dict[str, Any]:
    tenant = api_key.tenant
    return {
        "id": api_key.pk,
        "name": api_key.name,
        "prefix": api_key.prefix,
        "last_used_at": api_key.last_used_at,
        "rate_limit": api_key.rate_limit,
        "tenant": {"id": tenant.pk, "name": tenant.name, "slug": tenant.slug},
    }


def _recalled(digest: str, data: dict[str, Any]) -> ApiKey:
    tenant = Tenant(is_active=True, **data["tenant"])
    api_key = ApiKey(
        id=data["id"],
        tenant=tenant,
        name=data["name"],
        prefix=data["prefix"],
        hashed_key=digest,
        last_used_at=data["last_used_at"],
        rate_limit=data.get("rate_limit", ""),  # absent from entries cached before it existed
    )
    for instance in (tenant, api_key):
        instance._state.adding = False
        instance._state.db = "default"
    return api_key


def api_key_forget(digest: str) -> None:
    """Drop a key from the authentication cache (after a revoke or an edit), now and once
    more a moment later (flywheel.cache.forget)."""
    _key_memo.pop(digest, None)
    forget(AUTH_CACHE_KEY.format(digest=digest))


def _cached_key(digest: str) -> dict[str, Any] | None:
    """The key remembered in the shared cache, or None: not there, or the cache does not
    answer (then the database decides, as for a key not used lately)."""
    found = shared_cache().get(AUTH_CACHE_KEY.format(digest=digest))
    return found if isinstance(found, dict) else None


def _remember_key(digest: str, api_key: ApiKey) -> None:
    # A cache that is down skips this: the next request asks the database again.
    shared_cache().set(
        AUTH_CACHE_KEY.format(digest=digest), _remembered(api_key), AUTH_CACHE_SECONDS
    )


def api_key_recall(*, raw_key: str) -> ApiKey | None:
    """The key from the authentication cache alone (no database), if it is there and its
    last use was noted recently; None means: call api_key_authenticate."""
    digest = hash_api_key(raw_key)
    memo = _key_memo.get(digest)
    if memo is not None and time.monotonic() - memo[0] < KEY_MEMO_SECONDS:
        return memo[1]
    remembered = _cached_key(digest)
    if remembered is None:
        return None
    api_key = _recalled(digest, remembered)
    last_used = api_key.last_used_at
    if last_used is None or timezone.now() - last_used > LAST_USED_RESOLUTION:
        return None
    if len(_key_memo) >= KEY_MEMO_MAX:
        _key_memo.clear()
    _key_memo[digest] = (time.monotonic(), api_key)
    return api_key


def api_keys_forget_memo() -> None:
    """Drop this process's memo of recalled keys (tests)."""
    _key_memo.clear()


def api_key_authenticate(*, raw_key: str, address: str | None = None) -> ApiKey:
    """Return the active key matching ``raw_key`` and note its use.

    With the request's ``address``, a key that is not remembered (not in use
    lately) is looked up only if the address has not failed to authenticate
    too often, and a key that fails is counted against the address: the brake
    slows guessing, while keys in use pass whoever shares the address.

    Raises AuthenticationError when the key is unknown, malformed or revoked;
    RateLimitError when the address is past settings.AUTH_FAILURE_LIMIT.
    """
    digest = hash_api_key(raw_key)
    remembered = _cached_key(digest)
    if remembered is None and address is not None:
        address_admit(address=address)
    try:
        return _authenticated(digest, remembered)
    except AuthenticationError:
        if address is not None:
            address_failure_note(address=address)
        raise


def _authenticated(digest: str, remembered: dict[str, Any] | None) -> ApiKey:
    if remembered is not None:
        api_key = _recalled(digest, remembered)
    else:
        found = ApiKey.objects.active().select_related("tenant").filter(hashed_key=digest).first()
        # The lookup is by digest, so timing reveals nothing about the key; the
        # compare below only guards against a future change to that lookup.
        if found is None or not hmac.compare_digest(found.hashed_key, digest):
            raise AuthenticationError("Invalid or revoked API key.")
        api_key = found
    now = timezone.now()
    stale = api_key.last_used_at is None or now - api_key.last_used_at > LAST_USED_RESOLUTION
    if stale and remembered is None:  # just read from the database: it answers
        ApiKey.objects.filter(pk=api_key.pk).update(last_used_at=now)
    if stale:
        api_key.last_used_at = now
    if stale or remembered is None:
        _remember_key(digest, api_key)
    if stale and remembered is not None:
        # The cache vouches for the key: its use is noted behind the request. Submitted
        # after the cache write above, so that a revoked key's forget comes after it.
        _key_uses.submit(_note_use, api_key.pk, api_key.prefix, digest, now)
    return api_key


# Uses of remembered keys are noted by a thread of their own: a database that is
# down (or slow) must not hold up requests the cache has already authenticated.
_key_uses = ThreadPoolExecutor(max_workers=1, thread_name_prefix="key-uses")


def _note_use(pk: int, prefix: str, digest: str, when: datetime) -> None:
    """Note a remembered key's use; a key that turns out revoked (its revocation's cache
    delete was missed, say in a Redis outage) is forgotten, so it stops authenticating."""
    try:
        noted = ApiKey.objects.filter(pk=pk, revoked_at__isnull=True).update(last_used_at=when)
        if not noted:
            api_key_forget(digest)
    except DATABASE_UNAVAILABLE as err:  # the next use, a minute on, notes it again
        logger.warning("The use of API key %s could not be noted: %s", prefix, err)
    finally:
        connections.close_all()  # this thread's connection goes back to the pool


def api_key_uses_settle(timeout: float = 10.0) -> None:
    """Wait until the uses noted so far are written (tests)."""
    _key_uses.submit(lambda: None).result(timeout)


def api_key_revoke(*, api_key: ApiKey) -> ApiKey:
    """Revoke ``api_key`` (idempotent); it stops authenticating at once."""
    with transaction.atomic():
        ApiKey.objects.filter(pk=api_key.pk, revoked_at__isnull=True).update(
            revoked_at=timezone.now()
        )
        api_key.refresh_from_db()
    api_key_forget(api_key.hashed_key)
    return api_key

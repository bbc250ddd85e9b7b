"""API keys: stored hashed, shown once, revocable, and they authenticate the API."""

from __future__ import annotations

import time
from io import StringIO
from typing import Any

import pytest
from django.core.management import call_command
from django.test import override_settings
from django.utils import timezone
from rest_framework.test import APIClient

from flywheel import services
from flywheel.cache import shared_cache
from flywheel.errors import AuthenticationError, ValidationError
from flywheel.models import ApiKey, Tenant
from flywheel.ratelimit import api_key_rate
from flywheel.services import (
    api_key_authenticate,
    api_key_create,
    api_key_recall,
    api_key_revoke,
    hash_api_key,
)

pytestmark = pytest.mark.django_db


def test_a_key_is_stored_only_as_its_digest(tenant: Tenant) -> None:
    api_key, raw_key = api_key_create(tenant=tenant, name="ci")

    stored = ApiKey.objects.get(pk=api_key.pk)
    assert raw_key.startswith(f"fw_{stored.prefix}_")
    assert stored.hashed_key == hash_api_key(raw_key)
    assert raw_key not in {stored.hashed_key, stored.prefix, stored.name}


def test_a_key_round_trips_to_its_tenant_and_notes_its_use(tenant: Tenant) -> None:
    created, raw_key = api_key_create(tenant=tenant, name="ci")

    found = api_key_authenticate(raw_key=raw_key)

    assert found.pk == created.pk
    assert found.tenant == tenant
    assert ApiKey.objects.get(pk=created.pk).last_used_at is not None


@pytest.mark.parametrize("raw_key", ["", "fw_nope_nope", "not-a-key"])
def test_an_unknown_key_does_not_authenticate(tenant: Tenant, raw_key: str) -> None:
    api_key_create(tenant=tenant, name="ci")

    with pytest.raises(AuthenticationError):
        api_key_authenticate(raw_key=raw_key)


def test_a_revoked_key_stops_authenticating(tenant: Tenant) -> None:
    api_key, raw_key = api_key_create(tenant=tenant, name="ci")

    api_key_revoke(api_key=api_key)

    assert api_key.revoked_at is not None
    with pytest.raises(AuthenticationError):
        api_key_authenticate(raw_key=raw_key)


def test_a_key_of_an_inactive_tenant_stops_authenticating(tenant: Tenant) -> None:
    _, raw_key = api_key_create(tenant=tenant, name="ci")
    Tenant.objects.filter(pk=tenant.pk).update(is_active=False)

    with pytest.raises(AuthenticationError):
        api_key_authenticate(raw_key=raw_key)


def test_a_key_needs_a_name(tenant: Tenant) -> None:
    with pytest.raises(ValidationError):
        api_key_create(tenant=tenant, name="  ")
    assert not ApiKey.objects.exists()


def test_the_api_knows_the_tenant_behind_a_key(api_client: APIClient, tenant: Tenant) -> None:
    response = api_client.get("/api/v1/whoami")

    assert response.status_code == 200
    assert response.json()["tenant"] == {"slug": "acme", "name": "Acme"}


@pytest.mark.parametrize(
    "header", [None, "Bearer fw_00000000_wrong", "Token abc", "Bearer", "Basic dXNlcjpwYXNz"]
)
def test_the_api_refuses_a_missing_or_bad_key_in_the_error_shape(db, header: str | None) -> None:
    client = APIClient()
    if header:
        client.credentials(HTTP_AUTHORIZATION=header)

    response = client.get("/api/v1/whoami")

    assert response.status_code == 401
    assert response["WWW-Authenticate"].startswith("Bearer")
    error = response.json()["error"]
    assert error["type"] == "AuthenticationError"
    assert error["message"]
    assert error["details"] == {}


def test_the_create_api_key_command_prints_the_key_once(tenant: Tenant) -> None:
    out, err = StringIO(), StringIO()

    call_command("create_api_key", "--name", "cli", "--tenant", "acme", stdout=out, stderr=err)

    raw_key = out.getvalue().strip()
    assert api_key_authenticate(raw_key=raw_key).tenant == tenant
    assert raw_key not in err.getvalue()


def test_a_cached_key_stops_working_as_soon_as_it_is_revoked(tenant: Tenant) -> None:
    api_key, raw_key = api_key_create(tenant=tenant, name="ci")
    api_key_authenticate(raw_key=raw_key)  # now remembered in the cache

    api_key_revoke(api_key=api_key)

    with pytest.raises(AuthenticationError):
        api_key_authenticate(raw_key=raw_key)


def test_a_cached_key_stops_working_when_its_tenant_is_deactivated(tenant: Tenant) -> None:
    _, raw_key = api_key_create(tenant=tenant, name="ci")
    api_key_authenticate(raw_key=raw_key)

    tenant.is_active = False
    tenant.save()

    with pytest.raises(AuthenticationError):
        api_key_authenticate(raw_key=raw_key)


def test_a_cached_key_still_knows_its_tenant(tenant: Tenant) -> None:
    _, raw_key = api_key_create(tenant=tenant, name="ci")
    first = api_key_authenticate(raw_key=raw_key)

    again = api_key_authenticate(raw_key=raw_key)

    assert (again.pk, again.tenant.pk, again.tenant.slug) == (first.pk, tenant.pk, "acme")


def test_a_recalled_key_is_forgotten_at_once_when_revoked_in_this_process(tenant: Tenant) -> None:
    api_key, raw_key = api_key_create(tenant=tenant, name="ci")
    api_key_authenticate(raw_key=raw_key)
    assert api_key_recall(raw_key=raw_key) is not None  # now in this process's memo too

    api_key_revoke(api_key=api_key)

    assert api_key_recall(raw_key=raw_key) is None
    with pytest.raises(AuthenticationError):
        api_key_authenticate(raw_key=raw_key)


def test_a_key_revoked_by_another_process_stops_within_the_memo_time(
    tenant: Tenant, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(services, "KEY_MEMO_SECONDS", 0.05)
    api_key, raw_key = api_key_create(tenant=tenant, name="ci")
    api_key_authenticate(raw_key=raw_key)
    assert api_key_recall(raw_key=raw_key) is not None

    # What a revoke in another process does: the row, and the shared cache entry.
    ApiKey.objects.filter(pk=api_key.pk).update(revoked_at=timezone.now())
    shared_cache().delete(services.AUTH_CACHE_KEY.format(digest=api_key.hashed_key))
    assert api_key_recall(raw_key=raw_key) is not None  # this process's memo, still fresh
    time.sleep(0.06)

    assert api_key_recall(raw_key=raw_key) is None
    with pytest.raises(AuthenticationError):
        api_key_authenticate(raw_key=raw_key)


def test_a_stale_fill_racing_a_revoke_is_deleted_again_a_moment_later(
    tenant: Tenant, monkeypatch: pytest.MonkeyPatch
) -> None:
    from flywheel import cache

    monkeypatch.setattr(cache, "DELETE_AGAIN_SECONDS", 0.05)
    api_key, raw_key = api_key_create(tenant=tenant, name="ci")
    # Another process read the key from the database just before the revoke committed...
    read_before = ApiKey.objects.select_related("tenant").get(pk=api_key.pk)
    read_before.last_used_at = timezone.now()

    api_key_revoke(api_key=api_key)
    # ...and fills the cache just after the revoke deleted the entry.
    services._remember_key(api_key.hashed_key, read_before)
    assert api_key_recall(raw_key=raw_key) is not None  # the stale entry vouches, for now
    services.api_keys_forget_memo()
    time.sleep(0.3)

    assert api_key_recall(raw_key=raw_key) is None
    with pytest.raises(AuthenticationError):
        api_key_authenticate(raw_key=raw_key)


@pytest.mark.parametrize(
    ("given", "stored"),
    [("", ""), (" 600 / Minutes ", "600/minute"), ("OFF", "off"), ("0", "off"), ("5/day", "5/day")],
)
def test_a_key_rate_limit_is_stored_in_one_spelling(
    tenant: Tenant, given: str, stored: str
) -> None:
    api_key, _ = api_key_create(tenant=tenant, name="ci", rate_limit=given)

    assert ApiKey.objects.get(pk=api_key.pk).rate_limit == stored


@pytest.mark.parametrize("rate_limit", ["lots", "10/fortnight", "-5/minute", "1.5/second"])
def test_a_key_rate_limit_that_is_not_a_rate_is_refused(tenant: Tenant, rate_limit: str) -> None:
    with pytest.raises(ValidationError) as refused:
        api_key_create(tenant=tenant, name="ci", rate_limit=rate_limit)

    assert refused.value.details == {"field": "rate_limit"}
    assert not ApiKey.objects.exists()


def test_a_remembered_key_carries_its_rate_limit(tenant: Tenant) -> None:
    _, raw_key = api_key_create(tenant=tenant, name="ci", rate_limit="7/minute")
    api_key_authenticate(raw_key=raw_key)

    from_cache = api_key_authenticate(raw_key=raw_key)  # from the shared cache, not the database
    from_memo = api_key_recall(raw_key=raw_key)

    assert from_memo is not None
    assert (from_cache.rate_limit, from_memo.rate_limit) == ("7/minute", "7/minute")
    assert api_key_rate(from_memo) == (7, 60)


@override_settings(RATE_LIMIT=(100, 60))
def test_a_stored_rate_limit_that_does_not_parse_falls_back_to_the_setting(
    tenant: Tenant,
) -> None:
    api_key, _ = api_key_create(tenant=tenant, name="ci")
    ApiKey.objects.filter(pk=api_key.pk).update(rate_limit="garbage")  # past the validators

    assert api_key_rate(ApiKey.objects.get(pk=api_key.pk)) == (100, 60)


def test_keys_are_checked_in_the_database_while_the_cache_is_down(tenant: Tenant) -> None:
    _, raw_key = api_key_create(tenant=tenant, name="k")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw_key}")
    down = {"BACKEND": "flywheel.redis_cache.RedisCache", "LOCATION": "redis://127.0.0.1:1/0"}

    with override_settings(CACHES={"default": down}):  # nothing listens on port 1
        assert api_key_recall(raw_key=raw_key) is None  # not remembered: ask the database
        assert api_key_authenticate(raw_key=raw_key).tenant == tenant
        response = client.get("/api/v1/whoami")

    assert response.status_code == 200, response.content
    assert response.json()["tenant"]["slug"] == tenant.slug


# --- one path for every door -----------------------------------------------------------


@pytest.mark.parametrize(
    ("header", "key"), [("", None), ("Bearer fw_a_b", "fw_a_b"), ("Bearer  fw_a_b ", "fw_a_b")]
)
def test_the_header_is_read_one_way(header: str, key: str | None) -> None:
    from flywheel.authentication import bearer_key

    assert bearer_key(header) == key


@pytest.mark.parametrize("header", ["Token fw_a_b", "Bearer", "Bearer   ", "fw_a_b"])
def test_a_header_of_another_form_is_refused_in_one_set_of_words(header: str) -> None:
    from flywheel.authentication import BEARER_RULE, bearer_key

    with pytest.raises(AuthenticationError) as refused:
        bearer_key(header)

    assert refused.value.message == BEARER_RULE


@pytest.mark.django_db(transaction=True)  # the async door reads the key on a thread
def test_drf_and_the_async_doors_authenticate_through_the_same_function(
    tenant: Tenant, monkeypatch: pytest.MonkeyPatch
) -> None:
    from asgiref.sync import async_to_sync
    from django.test import RequestFactory

    from flywheel import asyncapi, authentication

    _, raw_key = api_key_create(tenant=tenant, name="ci")
    seen: list[str] = []
    real = authentication.api_key_of

    def spy(raw: str, **kwargs: Any) -> ApiKey:
        seen.append(raw)
        return real(raw, **kwargs)

    monkeypatch.setattr(authentication, "api_key_of", spy)
    monkeypatch.setattr(authentication, "api_key_recall", lambda raw_key: None)  # not remembered
    header = f"Bearer {raw_key}"

    drf = APIClient().get("/api/v1/whoami", HTTP_AUTHORIZATION=header)
    request = RequestFactory().post("/api/v1/query", HTTP_AUTHORIZATION=header)
    fast_lane = async_to_sync(asyncapi.authenticate)(request)

    assert drf.status_code == 200
    assert fast_lane.tenant_id == tenant.pk
    assert seen == [raw_key, raw_key]

"""Authentication by API key: ``Authorization: Bearer <key>``, one path for every door;
and, for the API reads the pages link to, a person's page login.

:func:`bearer_key` reads the header and :func:`api_key_of` authenticates the
key (:func:`api_key_of_async` from the event loop): the DRF views (through
:class:`ApiKeyAuthentication`, below), the async API views and the fast lane
(flywheel/asyncapi.py) and the MCP server (agents/auth.py) all go through
them, so the memo of recent keys and the brake on failed authentication per
address (flywheel.ratelimit) hold on each alike. The per-key rate limit is
each door's to count (``api_key_admit``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from importlib import import_module
from typing import Any

from django.conf import settings
from django.contrib import auth
from rest_framework import authentication, exceptions
from rest_framework.request import Request

from flywheel.asyncdb import db
from flywheel.errors import AuthenticationError
from flywheel.models import ApiKey, Tenant
from flywheel.ratelimit import api_key_admit, client_address
from flywheel.services import api_key_authenticate, api_key_recall

BEARER_RULE = "Use the header 'Authorization: Bearer <key>'."


def bearer_key(header: str) -> str | None:
    """The key an ``Authorization`` header's value carries; None without one.

    Raises AuthenticationError for a header of any other form.
    """
    if not header:
        return None
    scheme, _, raw_key = header.partition(" ")
    if scheme != "Bearer" or not raw_key.strip():
        raise AuthenticationError(BEARER_RULE)
    return raw_key.strip()


def api_key_of(raw_key: str, *, meta: Mapping[str, Any] | None = None) -> ApiKey:
    """The active key ``raw_key`` names: remembered when used lately (no database), else
    looked up, a failure counted against the client's address (``meta``, a request's
    META, says it). May read the database.

    Raises AuthenticationError, or RateLimitError for an address that failed too often.
    """
    address = client_address(meta) if meta is not None else None
    return api_key_recall(raw_key=raw_key) or api_key_authenticate(raw_key=raw_key, address=address)


async def api_key_of_async(raw_key: str, *, meta: Mapping[str, Any] | None = None) -> ApiKey:
    """:func:`api_key_of` from the event loop: a remembered key costs one cache read, or
    none; any other goes to the database on the shared executor."""
    return api_key_recall(raw_key=raw_key) or await db(api_key_of)(raw_key, meta=meta)


@dataclass(frozen=True)
class ApiClient:
    """The caller behind a request: ``request.user`` for API-key requests.

    The tenant always comes from here, never from the request body.
    """

    api_key: ApiKey

    @property
    def tenant(self) -> Tenant:
        return self.api_key.tenant

    is_authenticated = True
    is_anonymous = False


def request_api_key(request: Request) -> ApiKey:
    """The API key that authenticated ``request``.

    Raises AuthenticationError when the request was not authenticated by a key.
    """
    if not isinstance(request.auth, ApiKey):
        raise AuthenticationError("This endpoint needs an API key.")
    return request.auth


class ApiKeyAuthentication(authentication.BaseAuthentication):
    keyword = "Bearer"

    def authenticate(self, request: Request) -> tuple[ApiClient, ApiKey] | None:
        """The client behind the key, or None without an Authorization header.

        Raises AuthenticationFailed for a bad key; RateLimitError (429, which
        the exception handler answers with Retry-After) for a key over its
        limit or an address that failed too often.
        """
        try:
            raw_key = bearer_key(request.META.get("HTTP_AUTHORIZATION", ""))
            if raw_key is None:
                return None
            api_key = api_key_of(raw_key, meta=request.META)
        except AuthenticationError as err:
            raise exceptions.AuthenticationFailed(err.message) from err
        api_key_admit(api_key=api_key)
        return ApiClient(api_key=api_key), api_key

    def authenticate_header(self, request: Request) -> str:
        return f'{self.keyword} realm="api"'


class PageLoginAuthentication(authentication.SessionAuthentication):
    """A person's login on the pages (Django's session cookie), for the API reads the
    pages link to: the analytics CSV and a session's visualisation JSON.

    API paths are served without the browser middleware (flywheel/asgi.py), so the
    session is read here from its cookie, as SessionMiddleware and
    AuthenticationMiddleware would read it: the same session store, and
    ``auth.get_user``'s checks (the session's password hash; an inactive or deleted
    user is nobody). DRF's SessionAuthentication then enforces CSRF on unsafe methods;
    the views that take this are GETs. Returns None without a login.
    """

    def authenticate(self, request: Request) -> tuple[Any, None] | None:
        page_request = request._request
        if not hasattr(page_request, "user"):  # the full middleware set it otherwise
            key = page_request.COOKIES.get(settings.SESSION_COOKIE_NAME)
            if not key:
                return None
            store = import_module(settings.SESSION_ENGINE).SessionStore
            page_request.session = store(key)
            page_request.user = auth.get_user(page_request)
        return super().authenticate(request)

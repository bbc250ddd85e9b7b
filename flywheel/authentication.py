"""DRF authentication by API key: ``Authorization: Bearer <key>``, with its rate limit.

Every DRF view that takes a key goes through here, so the per-key limit and
the brake on failed authentication per address (flywheel.ratelimit) hold on
each of them as on the async doors.
"""

from __future__ import annotations

from dataclasses import dataclass

from rest_framework import authentication, exceptions
from rest_framework.request import Request

from flywheel.errors import AuthenticationError
from flywheel.models import ApiKey, Tenant
from flywheel.ratelimit import api_key_admit, client_address
from flywheel.services import api_key_authenticate


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
        header = authentication.get_authorization_header(request).decode(errors="replace")
        if not header:
            return None
        scheme, _, raw_key = header.partition(" ")
        if scheme != self.keyword or not raw_key.strip():
            raise exceptions.AuthenticationFailed("Use the header 'Authorization: Bearer <key>'.")
        address = client_address(request.META)
        try:
            api_key = api_key_authenticate(raw_key=raw_key.strip(), address=address)
        except AuthenticationError as err:
            raise exceptions.AuthenticationFailed(err.message) from err
        api_key_admit(api_key=api_key)
        return ApiClient(api_key=api_key), api_key

    def authenticate_header(self, request: Request) -> str:
        return f'{self.keyword} realm="api"'

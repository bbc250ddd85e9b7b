"""DRF authentication by API key: ``Authorization: Bearer <key>``."""

from __future__ import annotations

from dataclasses import dataclass

from rest_framework import authentication, exceptions
from rest_framework.request import Request

from flywheel.errors import AuthenticationError
from flywheel.models import ApiKey, Tenant
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
        header = authentication.get_authorization_header(request).decode(errors="replace")
        if not header:
            return None
        scheme, _, raw_key = header.partition(" ")
        if scheme != self.keyword or not raw_key.strip():
            raise exceptions.AuthenticationFailed("Use the header 'Authorization: Bearer <key>'.")
        try:
            api_key = api_key_authenticate(raw_key=raw_key.strip())
        except AuthenticationError as err:
            raise exceptions.AuthenticationFailed(err.message) from err
        return ApiClient(api_key=api_key), api_key

    def authenticate_header(self, request: Request) -> str:
        return f'{self.keyword} realm="api"'

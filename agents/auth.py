"""Who is calling the MCP tools: a Flywheel API key, and through it a tenant.

- stdio: the key given at start-up (FLYWHEEL_API_KEY or ``--api-key``),
  checked before serving and again on every call, so a revoked key stops
  working within a second (the memo of flywheel.services).
- streamable HTTP: ``Authorization: Bearer <key>`` on every HTTP request,
  checked by :class:`BearerAuth` before the MCP app sees it (401 in the
  error shape without a valid one); the key travels to the tools in a
  context variable, which the SDK's request tasks inherit.

Either way every tool call counts against the key's rate limit
(:func:`admitted`), as every REST request does.
"""

from __future__ import annotations

import json
import logging
from contextvars import ContextVar
from typing import Any, Protocol

from flywheel.authentication import BEARER_RULE, api_key_of_async, bearer_key
from flywheel.errors import (
    ApplicationError,
    AuthenticationError,
    RateLimitError,
    internal_error_body,
)
from flywheel.models import ApiKey
from flywheel.ratelimit import api_key_admit

logger = logging.getLogger(__name__)

_request_key: ContextVar[ApiKey | None] = ContextVar("flywheel_mcp_api_key", default=None)


class Caller(Protocol):
    async def api_key(self) -> ApiKey:
        """The caller's active key. Raises AuthenticationError."""
        ...


class KeyCaller:
    """One key for the whole process (stdio; in-process clients in tests)."""

    def __init__(self, raw_key: str) -> None:
        self._raw_key = raw_key

    async def api_key(self) -> ApiKey:
        return await api_key_of_async(self._raw_key)


class RequestCaller:
    """The key BearerAuth found on the HTTP request being served."""

    async def api_key(self) -> ApiKey:
        found = _request_key.get()
        if found is None:  # only if the app was served without BearerAuth around it
            raise AuthenticationError(BEARER_RULE)
        return found


async def admitted(caller: Caller) -> ApiKey:
    """The caller's key, counted against its rate limit.

    Raises AuthenticationError or RateLimitError. The count is one round trip
    to the shared cache, made on the event loop as the REST fast lane does
    (flywheel/asyncapi.py measured it: cheaper than a hop to a thread).
    """
    api_key = await caller.api_key()
    api_key_admit(api_key=api_key)
    return api_key


def _authorization(scope: dict[str, Any]) -> str:
    for name, value in scope.get("headers", ()):
        if name == b"authorization":
            return str(value.decode("latin-1"))
    return ""


async def _refuse(send: Any, status: int, body: dict[str, Any], headers: list[Any]) -> None:
    payload = json.dumps(body).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(payload)).encode()),
                *headers,
            ],
        }
    )
    await send({"type": "http.response.body", "body": payload})


class BearerAuth:
    """ASGI middleware: every HTTP request needs ``Authorization: Bearer <Flywheel key>``.

    Without a valid key: 401 (``WWW-Authenticate: Bearer``) in the error shape;
    from an address past its failed-authentication limit: 429 with
    Retry-After. Lifespan messages pass through to the MCP app.
    """

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        client = scope.get("client")
        meta = {"REMOTE_ADDR": client[0] if client else ""}
        try:
            raw_key = bearer_key(_authorization(scope))
            if raw_key is None:
                raise AuthenticationError(BEARER_RULE)
            api_key = await api_key_of_async(raw_key, meta=meta)
        except AuthenticationError as err:
            await _refuse(send, 401, err.as_dict(), [(b"www-authenticate", b'Bearer realm="mcp"')])
            return
        except RateLimitError as err:
            await _refuse(
                send, 429, err.as_dict(), [(b"retry-after", str(err.retry_after).encode())]
            )
            return
        except ApplicationError as err:
            await _refuse(send, err.status_code, err.as_dict(), [])
            return
        except Exception:
            logger.exception("Authenticating an MCP request failed inside Flywheel")
            await _refuse(send, 500, internal_error_body(), [])
            return
        token = _request_key.set(api_key)
        try:
            await self.app(scope, receive, send)
        finally:
            _request_key.reset(token)

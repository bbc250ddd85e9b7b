"""Typed reads of environment variables that fail loudly, naming the variable.

django-environ parses values, but a bad one surfaces as a bare ``ValueError``
that does not say which variable was wrong. Every setting goes through
:func:`read` so start-up stops with ``ImproperlyConfigured: NAME: ...``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import environ
from django.core.exceptions import ImproperlyConfigured

T = TypeVar("T")

_env = environ.Env()


def read(name: str, parse: Callable[[str], T], default: T) -> T:
    """Return ``parse(os.environ[name])``, or ``default`` when unset or empty.

    Raises ImproperlyConfigured naming the variable when the value does not parse.
    """
    raw = _env.str(name, default="")
    if raw == "":
        return default
    try:
        return parse(raw)
    except (ValueError, TypeError, ImproperlyConfigured) as err:
        raise ImproperlyConfigured(f"{name}: invalid value {raw!r} ({err})") from err


def as_bool(raw: str) -> bool:
    """Parse true/false, yes/no, on/off, 1/0; anything else is an error."""
    value = raw.strip().lower()
    if value in {"1", "true", "yes", "on"}:
        return True
    if value in {"0", "false", "no", "off"}:
        return False
    raise ValueError("expected true or false")


def as_positive_float(raw: str) -> float:
    value = float(raw)
    if value <= 0:
        raise ValueError("must be greater than zero")
    return value


def as_fraction(raw: str) -> float:
    """A number from 0 to 1 (a confidence, a share)."""
    value = float(raw)
    if not 0 <= value <= 1:
        raise ValueError("must be between 0 and 1")
    return value


def as_positive_int(raw: str) -> int:
    value = int(raw)
    if value <= 0:
        raise ValueError("must be greater than zero")
    return value


def as_list(raw: str) -> list[str]:
    return [item.strip() for item in raw.split(",") if item.strip()]


def as_choice(*choices: str) -> Callable[[str], str]:
    def parse(raw: str) -> str:
        value = raw.strip().upper()
        if value not in choices:
            raise ValueError(f"expected one of {', '.join(choices)}")
        return value

    return parse


_DATABASE_SCHEMES = ("postgres", "postgresql", "pgsql", "sqlite")


def as_database(raw: str) -> dict[str, Any]:
    scheme = raw.split("://", 1)[0] if "://" in raw else ""
    if scheme not in _DATABASE_SCHEMES:
        raise ValueError(f"expected a URL with one of the schemes {', '.join(_DATABASE_SCHEMES)}")
    return _env.db_url_config(raw)


def as_cache(raw: str) -> dict[str, Any]:
    config: dict[str, Any] = _env.cache_url_config(raw)
    # Several checkouts (and their test runs) may share one Redis: each keeps its keys
    # under its own prefix, and clears only those.
    config["KEY_PREFIX"] = _env.str("FLYWHEEL_CACHE_PREFIX", default="flywheel")
    if config.get("BACKEND") == "django.core.cache.backends.redis.RedisCache":
        config["BACKEND"] = "flywheel.redis_cache.RedisCache"  # one client per pool
        # The query path reads the cache on the event loop: a Redis that hangs must cost
        # a bounded wait, not redis-py's default of none (then callers fail open or over).
        config.setdefault("OPTIONS", {}).update(
            {"socket_connect_timeout": 0.5, "socket_timeout": 1.0}
        )
    return config


def as_url(raw: str) -> str:
    if "://" not in raw:
        raise ValueError("expected a URL such as redis://127.0.0.1:6379/0")
    return raw


def as_networks(raw: str) -> list[str]:
    """Comma-separated CIDRs (IPv4 or IPv6), each checked; e.g. ``10.0.0.0/8,fd00::/8``."""
    import ipaddress

    networks = as_list(raw)
    for network in networks:
        ipaddress.ip_network(network, strict=False)
    return networks


def as_json_object(raw: str) -> dict[str, Any]:
    """A JSON object, e.g. ``{"name": "chatOpenAI", "inputs": {"modelName": "gpt-4o-mini"}}``."""
    import json

    value = json.loads(raw)
    if not isinstance(value, dict):
        raise ValueError("expected a JSON object")
    return value


_RATE_PERIODS = {"second": 1, "minute": 60, "hour": 3600, "day": 86400}


def as_rate(raw: str) -> tuple[int, int] | None:
    """``N/period`` (period: second, minute, hour or day) as (N, seconds); ``off`` is None."""
    value = raw.strip().lower()
    if value in {"off", "none", "0"}:
        return None
    count, _, period = value.partition("/")
    seconds = _RATE_PERIODS.get(period.strip().rstrip("s") or "")
    if seconds is None or not count.strip().isdigit() or int(count) <= 0:
        raise ValueError("expected N/second, N/minute, N/hour or N/day (or off)")
    return int(count), seconds

"""Where a backend may point: its URL's shape, and the addresses a tenant's backend may reach.

A backend registered or re-pointed with a tenant's API key is *restricted*:
it may reach only globally routable addresses, or those inside
``settings.BACKEND_ALLOWED_NETWORKS``. The policy is checked twice, with the
same function: when the URL is saved (every address its host resolves to,
:func:`url_problem`) and when connecting, on the addresses the resolver
returned (backends/http/), so a name that later resolves somewhere
else (DNS rebinding) gains nothing. Backends registered by staff (the admin,
management commands) are trusted and reach anything: that is how
``make peers`` registers servers on loopback.
"""

from __future__ import annotations

import socket
from functools import cache, lru_cache
from ipaddress import IPv4Address, IPv4Network, IPv6Address, IPv6Network, ip_address, ip_network
from urllib.parse import SplitResult, urlsplit

from django.conf import settings
from django.core.exceptions import ValidationError as DjangoValidationError

IPAddress = IPv4Address | IPv6Address
SCHEMES = ("http", "https")
_NAT64 = ip_network("64:ff9b::/96")
# Said the same way whether the name did not resolve or resolved somewhere
# internal: two messages would tell a tenant which internal names exist.
NOT_ALLOWED = (
    "A backend registered with an API key must point at a host that resolves to public "
    "addresses only (not loopback, private, link-local or other internal addresses)."
)


class AddressNotAllowed(OSError):
    """A restricted backend's host is, or resolves to, an address it may not reach.

    An OSError, as resolvers' errors are, so aiohttp reports it like a failed lookup.
    """


def validate_backend_url(value: str) -> None:
    """A backend URL: http or https, a host, no user-info. Raises Django's ValidationError."""
    if not value.isascii():
        raise DjangoValidationError(
            "The URL must be ASCII: write an international host name in its xn-- form "
            "and percent-encode the path.",
            code="ascii",
        )
    try:
        parts = urlsplit(value)
        parts.port  # noqa: B018 - raises ValueError for a port that is not a number
    except ValueError as err:
        raise DjangoValidationError("Enter a valid URL.", code="invalid") from err
    if parts.scheme.lower() not in SCHEMES:
        raise DjangoValidationError("The URL must start with http:// or https://.", code="scheme")
    if "@" in parts.netloc:
        raise DjangoValidationError(
            "The URL may not carry a user name or password; use the API key field.",
            code="userinfo",
        )
    if not parts.hostname:
        raise DjangoValidationError("The URL needs a host.", code="host")


def without_userinfo(url: str) -> str:
    """``url`` without any ``user:password@`` (rows saved before URLs were checked may hold one)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return ""
    if "@" not in parts.netloc:
        return url
    return SplitResult(
        parts.scheme, parts.netloc.rpartition("@")[2], parts.path, parts.query, parts.fragment
    ).geturl()


@cache
def _networks(spelled: tuple[str, ...]) -> tuple[IPv4Network | IPv6Network, ...]:
    return tuple(ip_network(network, strict=False) for network in spelled)


def allowed_networks() -> tuple[IPv4Network | IPv6Network, ...]:
    """settings.BACKEND_ALLOWED_NETWORKS, parsed (once per distinct value)."""
    return _networks(tuple(settings.BACKEND_ALLOWED_NETWORKS))


def _embedded_v4(ip: IPv6Address) -> IPv4Address | None:
    """The IPv4 address a 6to4, NAT64, Teredo or IPv4-compatible address carries."""
    if ip.sixtofour is not None:
        return ip.sixtofour
    if ip.teredo is not None:
        return ip.teredo[1]
    if ip in _NAT64 or int(ip) >> 32 == 0:
        return IPv4Address(int(ip) & 0xFFFFFFFF)
    return None


def _internal(ip: IPAddress) -> bool:
    # is_global alone is not enough: multicast and IPv6 site-local count as global.
    return (
        not ip.is_global
        or ip.is_multicast
        or ip.is_private
        or ip.is_loopback
        or ip.is_link_local
        or ip.is_reserved
        or ip.is_unspecified
        or (isinstance(ip, IPv6Address) and ip.is_site_local)
    )


def address_allowed(ip: IPAddress) -> bool:
    """Whether a restricted backend may connect to ``ip``.

    Inside an allowed network: yes. Otherwise the address, and any IPv4
    address embedded in an IPv6 one, must be globally routable.
    """
    if isinstance(ip, IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped  # one address, two spellings
    networks = allowed_networks()
    if any(ip.version == network.version and ip in network for network in networks):
        return True
    if _internal(ip):
        return False
    inner = _embedded_v4(ip) if isinstance(ip, IPv6Address) else None
    return inner is None or address_allowed(inner)


def spelled_allowed(address: str) -> bool:
    """:func:`address_allowed` for an address as text; False when it is not one.

    Asked on every call to a restricted backend with an address in its URL, so the
    verdict is remembered per address and allowed networks (parsing and judging one
    cost a question 30 µs)."""
    return _spelled_allowed(address, tuple(settings.BACKEND_ALLOWED_NETWORKS))


@lru_cache(maxsize=1024)
def _spelled_allowed(address: str, networks: tuple[str, ...]) -> bool:
    try:
        return address_allowed(ip_address(address))
    except ValueError:
        return False


def resolve(host: str, port: int) -> list[str]:
    """Every address ``host`` resolves to (a literal, in any spelling, resolves to itself).

    Raises OSError (or UnicodeError for a name IDNA cannot encode) when it does not resolve.
    """
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return sorted({str(info[4][0]) for info in infos})


def url_problem(url: str) -> str | None:
    """Why a restricted backend may not point at ``url``, or None when it may.

    Resolves the host now (blocking: call from sync code) and requires every
    address to pass :func:`address_allowed`.
    """
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        port = parts.port or (443 if parts.scheme.lower() == "https" else 80)
        addresses = resolve(host, port) if host else []
    except (OSError, UnicodeError, ValueError):
        return NOT_ALLOWED
    if not addresses or not all(spelled_allowed(address) for address in addresses):
        return NOT_ALLOWED
    return None

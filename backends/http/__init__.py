"""The one HTTP layer every outbound call to a backend uses. Inside:

- client.py: :class:`HttpClient`, one pooled client per server: timeouts, a
  bounded retry budget, typed errors, credentials scrubbed from what it says;
- transport.py: the request and response values every transport trades in,
  and aiohttp carrying TLS and streamed answers;
- plain.py: whole requests over kept-alive HTTP/1.1 parsed by httptools (the
  query path's backend call), and NetworkTransport choosing between the two;
- limits.py: every timeout, pool size and retry budget;
- redact.py: scrubbing what a server said before anyone reads it.

Where a backend may point is backends/addresses.py's to say (backend rows
and their forms use it too); both transports apply it at connect time.
"""

from backends.http.client import (
    HttpClient,
    content_type,
    describe,
    json_body,
    ms_since,
    reply_details,
    unreadable,
)
from backends.http.plain import NetworkTransport
from backends.http.transport import (
    Request,
    Response,
    Transport,
    TransportError,
    TransportTimeout,
)

__all__ = [
    "HttpClient",
    "NetworkTransport",
    "Request",
    "Response",
    "Transport",
    "TransportError",
    "TransportTimeout",
    "content_type",
    "describe",
    "json_body",
    "ms_since",
    "reply_details",
    "unreadable",
]

"""The one HTTP layer every outbound call of Flywheel uses.

Backends' adapters, the LLM and embeddings all call out through it, and
nothing else in the project imports an HTTP library (tests/test_layers.py
holds this). Inside:

- client.py: :class:`HttpClient`, one pooled client per server: timeouts, a
  bounded retry budget, typed errors, credentials scrubbed from what it says;
- transport.py: the request and response values every transport trades in,
  reading a server's JSON (``loads``), and aiohttp carrying TLS and streamed
  answers;
- plain.py: whole requests over kept-alive HTTP/1.1 parsed by httptools (the
  query path's backend call), and NetworkTransport choosing between the two;
- limits.py: every timeout, pool size and retry budget;
- redact.py: scrubbing what a server said before anyone reads it;
- openai.py: POST JSON to an OpenAI-compatible endpoint with a bearer key,
  bounded, with typed failures (the LLM, embeddings).

Where a backend may point is backends/addresses.py's to say (backend rows
and their forms use it too); both transports apply it at connect time. The
LLM and embeddings endpoints are the operator's (set by environment) and
trusted, as staff-registered backends are (openai.py).
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
from backends.http.openai import (
    BlockingOpenAIClient,
    EndpointError,
    OpenAIClient,
    OpenAIEndpoint,
    close_endpoints,
    endpoint_client,
)
from backends.http.plain import NetworkTransport
from backends.http.transport import (
    Request,
    Response,
    Transport,
    TransportError,
    TransportTimeout,
    loads,
)

__all__ = [
    "BlockingOpenAIClient",
    "EndpointError",
    "HttpClient",
    "NetworkTransport",
    "OpenAIClient",
    "OpenAIEndpoint",
    "Request",
    "Response",
    "Transport",
    "TransportError",
    "TransportTimeout",
    "close_endpoints",
    "content_type",
    "describe",
    "endpoint_client",
    "json_body",
    "loads",
    "ms_since",
    "reply_details",
    "unreadable",
]

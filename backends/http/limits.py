"""Every bound on Flywheel's outbound HTTP, in one place: timeouts, pools, retries, sizes.

The client (client.py), the transports under it (plain.py, transport.py) and
the OpenAI-compatible helper (openai.py) read these, so one number changes
in one line. What is a setting (a
backend's own read timeout) comes from its row, not from here; the bounds an operator
may change (how much discovery reads, how large a flow record may be) are Django
settings, read here when used.
"""

from __future__ import annotations

from django.conf import settings

# --- time -------------------------------------------------------------------------------
# Connecting should be quick on the networks backends live on; the read timeout is the
# backend's own setting (a flow may think for a while).
CONNECT_TIMEOUT_SECONDS = 5.0
# A backend's timeout when none is set (the model's default is the same).
DEFAULT_TIMEOUT_SECONDS = 60.0
# Servers close idle keep-alive connections after about 5 s (Express, uvicorn): the
# plain transport retires a connection idle for longer than this rather than race them.
IDLE_SECONDS = 4.0
# aiohttp's keep-alive for the TLS and streamed requests it carries.
KEEPALIVE_SECONDS = 15.0

# --- pools ------------------------------------------------------------------------------
# Connections kept open to one backend; more requests than this wait for one.
MAX_CONNECTIONS = 1000

# --- the retry budget (idempotent calls, or calls that ask for it) ----------------------
MAX_RETRIES = 2
BACKOFF_BASE_SECONDS = 0.25
BACKOFF_CAP_SECONDS = 2.0
RETRY_AFTER_CAP_SECONDS = 10.0

# --- sizes: what a server sends is bounded while it is read ----------------------------
# A flow's answer to a question, whole or streamed (all its events together),
# decompressed: FLYWHEEL_MAX_ANSWER_BYTES (2 MiB by default), read at each call.


def answer_bytes() -> int:
    """The most of a flow's answer Flywheel reads (FLYWHEEL_MAX_ANSWER_BYTES)."""
    limit: int = settings.MAX_ANSWER_BYTES
    return limit


# Any other reply, decompressed: a page of discovery, a flow with its definition. A page
# of 100 Flowise flows with their flowData is a few MB.
DOCUMENT_BYTES = 32 * 1024 * 1024
# A health probe's reply ("pong", a small JSON object).
PROBE_BYTES = 64 * 1024
# An answer's status line and headers (aiohttp bounds each header line at 8 KB).
HEADER_BYTES = 64 * 1024

# --- OpenAI-compatible endpoints (the LLM, embeddings; openai.py) -----------------------
# On a question's path each call has a total deadline of its own setting
# (LLM_TIMEOUT_SECONDS, EMBEDDINGS_TIMEOUT_SECONDS; 0.5 s for a query type). Off it, a
# batch of examples embedded at training time may wait this long for each part of
# its answer.
ENDPOINT_BATCH_TIMEOUT_SECONDS = 30.0
# A chat completion, or a batch of vectors (100 texts of 3,072 floats is about 7 MB).
ENDPOINT_ANSWER_BYTES = 16 * 1024 * 1024

# --- a backend's flows: how many discovery reads, how large a record may be -------------
# Settings, because an operator with larger backends may raise them; read when used, so a
# changed setting (and a test's override) holds at once. flywheel/settings.py reads them
# from the environment, with their defaults.
#
# A backend that answered {"data": [100 flows], "total": 1000000000} once made discovery
# ask for 22,164 pages in 40 s (700 MB). Now: at most DISCOVERY_MAX_PAGES pages (100),
# DISCOVERY_MAX_FLOWS flows (10,000: 100 full pages), and a page that brings no flow not
# seen before ends the list whatever it promised (backends/adapters/discovery.py).
DISCOVERY_PAGE_SETTING = "FLYWHEEL_DISCOVERY_MAX_PAGES"
DISCOVERY_FLOW_SETTING = "FLYWHEEL_DISCOVERY_MAX_FLOWS"
# A record's text field (a description, a date) is kept in the Flow row or shown; 64 KiB
# by default. Its flowData is only shown (GET chatflow), and may be larger: a flow
# Flywheel creates may be 1 MB, and the JSON it is shown as may escape each non-ASCII
# character to six bytes, so 4 MiB by default (the largest flow captured from the peers,
# two LLM components in Langflow, is 64.6 kB). Records: backends/adapters/records.py.
RECORD_FIELD_SETTING = "FLYWHEEL_RECORD_FIELD_MAX_BYTES"
FLOW_DATA_SETTING = "FLYWHEEL_FLOW_DATA_MAX_BYTES"


def discovery_max_pages() -> int:
    return int(settings.DISCOVERY_MAX_PAGES)


def discovery_max_flows() -> int:
    return int(settings.DISCOVERY_MAX_FLOWS)


def record_field_max_bytes() -> int:
    return int(settings.RECORD_FIELD_MAX_BYTES)


def flow_data_max_bytes() -> int:
    return int(settings.FLOW_DATA_MAX_BYTES)

"""How uvicorn serves Flywheel: the options every command that starts it passes.

``manage.py serve`` (what `make run` starts) and ``manage.py runmcp --transport
streamable-http`` take them from here, so the server's behaviour is set in
settings like everything else, not by uvicorn's defaults.

Forwarded headers: uvicorn believes ``X-Forwarded-For`` and ``X-Forwarded-Proto``
from 127.0.0.1 unless told otherwise, so anything on the same host (or a proxy
there that passes a client's header along) could name any client address, and
the brake on failed authentication per address (flywheel.ratelimit) counted
every guess against a fresh one. They are believed only from the proxies
FLYWHEEL_TRUSTED_PROXIES names; with none named (the default) they are ignored.

Read limits: uvicorn bounds neither how long a request's headers may take nor
how large they may be (BoundedHttpToolsProtocol, below, does); a request's body
is bounded by the application itself (flywheel/readlimits.py), whatever serves
it.
"""

from __future__ import annotations

import asyncio
from http import HTTPStatus
from typing import Any

from django.conf import settings
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from flywheel.errors import ApplicationError, HeadersTooLargeError, RequestTimeoutError
from flywheel.readlimits import refusal_messages

APPLICATION = "flywheel.asgi:application"
# Node's and nginx's bounds are 16 and 32 KiB; Flywheel's own headers (a key, an admin
# session's cookies) take well under 4 KiB.
MAX_HEADER_BYTES = 64 * 1024


def uvicorn_options() -> dict[str, Any]:
    """uvicorn.run's / uvicorn.Config's keyword arguments for Flywheel's settings."""
    trusted: list[str] = settings.TRUSTED_PROXIES
    return {
        "http": f"{__name__}:BoundedHttpToolsProtocol",
        "ws": "none",  # no door speaks WebSocket: no upgrade takes a connection elsewhere
        "proxy_headers": bool(trusted),
        # Never None: uvicorn would read FORWARDED_ALLOW_IPS, or trust loopback.
        "forwarded_allow_ips": list(trusted),
    }


class BoundedHttpToolsProtocol(HttpToolsProtocol):
    """uvicorn's HTTP/1.1 protocol (httptools) with deadlines on a request's headers and
    body, and a size bound on its headers.

    uvicorn waits for a request without end and keeps whatever it is sent of its
    headers: a connection that sent half a request, or nothing, or half a body,
    stayed open (a byte now and then kept it so for good), and 1 MiB of headers
    was taken. Here the headers must be complete within
    settings.HEADER_TIMEOUT_SECONDS of the connection opening or of the request's
    first byte, and within MAX_HEADER_BYTES (else 431); the body within
    settings.BODY_TIMEOUT_SECONDS of the headers. A request late is answered 408
    (unless its answer has begun); every refusal closes the connection. Between
    requests on a kept-alive connection uvicorn's own keep-alive timeout (5 s)
    applies; the body's size is the application's to bound (flywheel/readlimits.py).
    The two timers cost 2.5-3 µs of CPU a request (11 against 13.5 µs for uvicorn's
    protocol alone, a small POST on a kept-alive connection, under uvloop).
    """

    _header_timer: asyncio.TimerHandle | None = None
    _header_bytes = 0
    _request_begun = False  # a byte of the request whose headers are awaited has come
    _body_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._await_headers()

    def connection_lost(self, exc: Exception | None) -> None:
        self._headers_in()
        self._body_in()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        waiting = self._header_timer
        super().data_received(data)
        # Counted while one request's headers are still awaited; httptools keeps a header
        # until its line ends, so the bound must hold across what it has not passed on.
        if waiting is not None and self._header_timer is waiting:
            self._header_bytes += len(data)
            if self._header_bytes > MAX_HEADER_BYTES:
                self._refuse(
                    HeadersTooLargeError(
                        f"The request headers are larger than {MAX_HEADER_BYTES} bytes.",
                        details={"max_bytes": MAX_HEADER_BYTES},
                    )
                )

    def on_message_begin(self) -> None:
        super().on_message_begin()
        if self._header_timer is None:
            self._await_headers()
        self._request_begun = True

    def on_headers_complete(self) -> None:
        self._headers_in()
        self._request_begun = False
        super().on_headers_complete()
        # Until the message completes (at once for a request without a body), unless the
        # request waits behind another (pipelined), its reading paused meanwhile.
        if not self.pipeline:
            self._body_timer = self.loop.call_later(settings.BODY_TIMEOUT_SECONDS, self._body_late)

    def on_message_complete(self) -> None:
        self._body_in()
        super().on_message_complete()

    def _await_headers(self) -> None:
        self._header_bytes = 0
        self._header_timer = self.loop.call_later(
            settings.HEADER_TIMEOUT_SECONDS, self._headers_late
        )

    def _headers_in(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _body_in(self) -> None:
        if self._body_timer is not None:
            self._body_timer.cancel()
            self._body_timer = None

    def _body_late(self) -> None:
        self._body_timer = None
        timeout = settings.BODY_TIMEOUT_SECONDS
        if self.cycle is None or self.cycle.response_started:  # no 408 can follow an answer
            self.transport.close()
            return
        self._refuse(
            RequestTimeoutError(
                f"The request body did not arrive within {timeout:g} seconds.",
                details={"timeout_seconds": timeout},
            ),
            answering=True,
        )

    def _headers_late(self) -> None:
        if not self._request_begun:  # nothing asked: closed without a word, as nginx does
            self._headers_in()
            self.transport.close()
            return
        timeout = settings.HEADER_TIMEOUT_SECONDS
        self._refuse(
            RequestTimeoutError(
                f"The request headers did not arrive within {timeout:g} seconds.",
                details={"timeout_seconds": timeout},
            )
        )

    def _refuse(self, err: ApplicationError, *, answering: bool = False) -> None:
        """Answer ``err`` and close; behind an answer still going out (a pipelined
        request), close once that one is sent. ``answering``: ``err`` is the answer to
        the request in hand, whose application then hears the client left."""
        self._headers_in()
        if self.transport.is_closing():
            return
        if not answering and self.cycle is not None and not self.cycle.response_complete:
            self.cycle.keep_alive = False
            self.flow.pause_reading()
            return
        start, body = refusal_messages(err)
        phrase = HTTPStatus(err.status_code).phrase.encode()
        head = [b"HTTP/1.1 %d %s\r\n" % (err.status_code, phrase)]
        head += [name + b": " + value + b"\r\n" for name, value in start["headers"]]
        self.transport.write(b"".join([*head, b"\r\n", body["body"]]))
        self.transport.close()

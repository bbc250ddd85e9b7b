"""A minimal HTTP/1.1 keep-alive client for the benchmarks.

The load generator runs on the same two cores as the server it measures, so
its own cost must stay small: a full client (httpx) spends about a
millisecond of CPU per request, which would be counted against Flywheel in
the concurrency figure. This one writes the request bytes and reads
Content-Length or chunked bodies, nothing more.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any


class HttpConnection:
    """One keep-alive connection; one request at a time."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._reader = reader
        self._writer = writer

    @classmethod
    async def open(cls, host: str, port: int) -> HttpConnection:
        reader, writer = await asyncio.open_connection(host, port)
        return cls(reader, writer)

    async def post(
        self, path: str, payload: Any, headers: dict[str, str] | None = None
    ) -> tuple[int, bytes]:
        """POST ``payload`` as JSON; return the status and the body."""
        body = json.dumps(payload).encode()
        lines = [
            f"POST {path} HTTP/1.1",
            "Host: 127.0.0.1",
            "Content-Type: application/json",
            f"Content-Length: {len(body)}",
            *(f"{name}: {value}" for name, value in (headers or {}).items()),
        ]
        self._writer.write(("\r\n".join(lines) + "\r\n\r\n").encode() + body)
        return await self._response()

    async def get(self, path: str) -> tuple[int, bytes]:
        self._writer.write(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())
        return await self._response()

    async def _response(self) -> tuple[int, bytes]:
        head = await self._reader.readuntil(b"\r\n\r\n")
        status_line, *header_lines = head.decode("latin-1").split("\r\n")
        status = int(status_line.split(" ", 2)[1])
        headers = {}
        for line in header_lines:
            if ":" in line:
                name, value = line.split(":", 1)
                headers[name.strip().lower()] = value.strip()
        if "content-length" in headers:
            return status, await self._reader.readexactly(int(headers["content-length"]))
        if headers.get("transfer-encoding") == "chunked":
            chunks = []
            while size := int((await self._reader.readuntil(b"\r\n")).strip(), 16):
                chunks.append(await self._reader.readexactly(size))
                await self._reader.readexactly(2)
            await self._reader.readuntil(b"\r\n")
            return status, b"".join(chunks)
        raise RuntimeError(f"response without a length: {head!r}")

    def close(self) -> None:
        self._writer.close()

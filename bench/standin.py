"""A stand-in backend for benchmarks: answers Flowise's prediction API, optionally after a
delay, its ping, and its chatflow list (so discovery finds a flow).

Run: python bench/standin.py PORT DELAY_SECONDS
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

DELAY = 0.0
# Discovery's answer: the chatflow list a real Flowise 3.1.4 gave (tests/fixtures).
CHATFLOWS = json.dumps(
    json.loads(
        (
            Path(__file__).resolve().parent.parent / "tests/fixtures/flowise/chatflows_list.json"
        ).read_text()
    )["body"]
).encode()


async def read_body(receive: Any) -> bytes:
    """The whole request body of an ASGI HTTP request."""
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            return body


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] != "http":
        return
    body = await read_body(receive)
    if scope["path"] == "/api/v1/ping":
        payload, content_type = b"pong", b"text/html"
    elif scope["method"] == "GET" and scope["path"] == "/api/v1/chatflows":
        payload, content_type = CHATFLOWS, b"application/json"  # for discovery
    else:
        question = json.loads(body or b"{}").get("question", "")
        session = (json.loads(body or b"{}").get("overrideConfig") or {}).get("sessionId", "s")
        if DELAY:
            await asyncio.sleep(DELAY)
        payload = json.dumps({"text": f"Echo: {question}", "sessionId": session}).encode()
        content_type = b"application/json"
    await send(
        {"type": "http.response.start", "status": 200, "headers": [(b"content-type", content_type)]}
    )
    await send({"type": "http.response.body", "body": payload})


if __name__ == "__main__":
    import uvicorn

    DELAY = float(sys.argv[2]) if len(sys.argv) > 2 else 0.0
    uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="error", backlog=2048)

"""A stand-in backend for benchmarks: answers Flowise's prediction API, optionally after a
delay, its ping, and its chatflow list (so discovery finds a flow).

Run: python bench/standin.py PORT DELAY_SECONDS

For the fault suite (scripts/chaos.py) it can fail a share of its predictions:
``POST /_faults {"fault": "500" | "hang" | "malformed" | "", "share": 0.3}``
sets it (every Nth prediction, evenly: 0.3 fails 3 in 10); "hang" never answers,
"malformed" answers 200 with a body that is not JSON, "drip" answers 200 with its
Content-Length and then the body a byte a second (an idle timer never fires).
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

DELAY = 0.0
FAULT: dict[str, Any] = {"fault": "", "share": 0.0, "credit": 0.0}
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


async def respond(send: Any, status: int, content_type: bytes, payload: bytes) -> None:
    """Send a whole ASGI HTTP response."""
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", content_type)],
        }
    )
    await send({"type": "http.response.body", "body": payload})


async def _drip(send: Any, payload: bytes) -> None:
    """A whole answer, declared up front and sent a byte a second."""
    length = str(len(payload)).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", length)]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    for i in range(len(payload)):
        await send({"type": "http.response.body", "body": payload[i : i + 1], "more_body": True})
        await asyncio.sleep(1)
    await send({"type": "http.response.body", "body": b""})


def _faulty() -> bool:
    """Whether this prediction fails: a share of them, spread evenly."""
    if not FAULT["fault"]:
        return False
    FAULT["credit"] += FAULT["share"]
    if FAULT["credit"] >= 1.0:
        FAULT["credit"] -= 1.0
        return True
    return False


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] != "http":
        return
    body = await read_body(receive)
    status = 200
    if scope["path"] == "/_faults":
        FAULT.update(json.loads(body), credit=0.0)
        payload, content_type = b"{}", b"application/json"
    elif scope["path"] == "/api/v1/ping":
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
        if _faulty():
            if FAULT["fault"] == "hang":
                await asyncio.sleep(3600)
            elif FAULT["fault"] == "drip":
                await _drip(send, payload)
                return
            elif FAULT["fault"] == "malformed":
                payload = b"<html>502 Bad Gateway</html>"
            else:
                status, payload = 500, b'{"message": "Internal Server Error"}'
    await respond(send, status, content_type, payload)


if __name__ == "__main__":
    import uvicorn

    DELAY = float(sys.argv[2]) if len(sys.argv) > 2 else 0.0
    uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="error", backlog=2048)

"""A fake OpenAI-compatible chat server, so the live peers can run flows with an LLM node.

The machine has no real LLM and no internet. Flowise's ChatOpenAI and
Langflow's OpenAI components accept a base URL; pointed at this server they
get an answer ``"FAKE-LLM: <last user message>"`` and an OpenAI-shaped
``usage`` object, which is what the usage fixtures record.

    .venv/bin/python scripts/peers/fake_openai.py [PORT]      # default 3199, 127.0.0.1 only

Endpoints:
  GET  /v1/models             a fixed list of model ids (any model name is answered)
  GET  /v1/_last_request      the sampling parameters of the last chat request
                              (temperature, max_tokens, model), so a live test can
                              see what a flow's model component was given
  POST /v1/chat/completions   non-streaming: one chat.completion with ``usage``;
                              ``"stream": true``: SSE ``data:`` chunks (role, the
                              answer in word-sized pieces, finish_reason), then,
                              when ``stream_options.include_usage`` is true, a
                              chunk with empty ``choices`` and ``usage``, then
                              ``data: [DONE]``.

Token counts are deterministic, not a tokenizer's: every message costs 3
tokens plus one per whitespace-separated word (prompt), and the answer one per
word (completion). One request line per call goes to stderr. Standard library only.
"""

from __future__ import annotations

import json
import sys
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

DEFAULT_PORT = 3199
MODEL_IDS = ("gpt-4o-mini", "gpt-4o", "gpt-4.1-mini", "gpt-3.5-turbo")
PER_MESSAGE_TOKENS = 3


def text_of(content: Any) -> str:
    """A message's text: a string, or the text parts of a multimodal list."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(
            str(part.get("text", "")) for part in content if isinstance(part, dict)
        ).strip()
    return ""


def last_user_message(messages: list[Any]) -> str:
    for message in reversed(messages):
        if isinstance(message, dict) and message.get("role") == "user":
            return text_of(message.get("content"))
    return ""


def usage_for(messages: list[Any], answer: str) -> dict[str, Any]:
    """An OpenAI-shaped usage object with the counts described in the module docstring."""
    prompt = sum(
        PER_MESSAGE_TOKENS + len(text_of(m.get("content")).split())
        for m in messages
        if isinstance(m, dict)
    )
    completion = len(answer.split())
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
        "completion_tokens_details": {
            "reasoning_tokens": 0,
            "audio_tokens": 0,
            "accepted_prediction_tokens": 0,
            "rejected_prediction_tokens": 0,
        },
    }


def pieces(answer: str) -> list[str]:
    """The answer split into word-sized deltas that join back to it exactly."""
    words = answer.split(" ")
    return [w if i == 0 else " " + w for i, w in enumerate(words)]


# What the last chat request asked for (GET /v1/_last_request).
LAST_REQUEST: dict[str, Any] = {}


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, chunked streams: what the SDKs expect
    server_version = "fake-openai/1.0"

    def log_message(self, format: str, *args: Any) -> None:
        print(f"[fake-openai] {format % args}", file=sys.stderr, flush=True)

    # --- helpers ---------------------------------------------------------------

    def send_json(self, status: int, payload: Any) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def send_chunk(self, text: str) -> None:
        data = text.encode()
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def read_json(self) -> Any:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            return json.loads(raw or b"{}")
        except ValueError:
            return None

    # --- routes ----------------------------------------------------------------

    def do_GET(self) -> None:
        if self.path.rstrip("/").endswith("/_last_request"):
            self.send_json(200, LAST_REQUEST)
            return
        if self.path.rstrip("/").endswith("/models"):
            created = int(time.time())
            models = [
                {"id": m, "object": "model", "created": created, "owned_by": "fake"}
                for m in MODEL_IDS
            ]
            self.send_json(200, {"object": "list", "data": models})
            return
        self.send_json(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})

    def do_POST(self) -> None:
        request = self.read_json()
        if not self.path.rstrip("/").endswith("/chat/completions"):
            self.send_json(
                404, {"error": {"message": f"no route {self.path}", "type": "not_found"}}
            )
            return
        if not isinstance(request, dict) or not isinstance(request.get("messages"), list):
            self.send_json(
                400, {"error": {"message": "messages is required", "type": "invalid_request"}}
            )
            return
        messages = request["messages"]
        LAST_REQUEST.clear()
        LAST_REQUEST.update({k: request.get(k) for k in ("model", "temperature")})
        # langchain-openai 1.x sends max_tokens as OpenAI's newer max_completion_tokens
        LAST_REQUEST["max_tokens"] = request.get("max_completion_tokens") or request.get(
            "max_tokens"
        )
        answer = f"FAKE-LLM: {last_user_message(messages)}"
        usage = usage_for(messages, answer)
        model = str(request.get("model") or MODEL_IDS[0])
        stream_options = request.get("stream_options") or {}
        include_usage = isinstance(stream_options, dict) and bool(
            stream_options.get("include_usage")
        )
        print(
            f"[fake-openai] chat model={model} messages={len(messages)} "
            f"stream={bool(request.get('stream'))} include_usage={include_usage}",
            file=sys.stderr,
            flush=True,
        )
        if request.get("stream"):
            self.stream_answer(model, answer, usage if include_usage else None)
        else:
            self.send_json(200, completion(model, answer, usage))

    def stream_answer(self, model: str, answer: str, usage: dict[str, Any] | None) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        base = {
            "id": f"chatcmpl-{uuid.uuid4().hex[:24]}",
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": model,
            "system_fingerprint": "fp_fake",
        }
        # With include_usage, OpenAI sends "usage": null on every chunk but the last.
        extra: dict[str, Any] = {"usage": None} if usage is not None else {}

        def choice(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
            return {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}

        chunks = [{**base, "choices": [choice({"role": "assistant", "content": ""})], **extra}]
        chunks += [{**base, "choices": [choice({"content": p})], **extra} for p in pieces(answer)]
        chunks.append({**base, "choices": [choice({}, "stop")], **extra})
        if usage is not None:
            chunks.append({**base, "choices": [], "usage": usage})
        for chunk in chunks:
            self.send_chunk(f"data: {json.dumps(chunk)}\n\n")
        self.send_chunk("data: [DONE]\n\n")
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()


def completion(model: str, answer: str, usage: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex[:24]}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "system_fingerprint": "fp_fake",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": answer, "refusal": None},
                "logprobs": None,
                "finish_reason": "stop",
            }
        ],
        "usage": usage,
    }


def main(argv: list[str]) -> int:
    port = int(argv[1]) if len(argv) > 1 else DEFAULT_PORT
    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    print(f"[fake-openai] listening on http://127.0.0.1:{port}/v1", file=sys.stderr, flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

"""Real questions routed between the real Flowise and Langflow, fallback included."""

from __future__ import annotations

import subprocess
from typing import Any

import pytest

from backends.adapters import run_sync
from backends.adapters.base import BackendConfig
from flywheel.models import Tenant
from routing.answering.query_input import query_request
from routing.answering.service import answer_question, stream_answer
from routing.install import defaults_load
from routing.models import RoutingDecision
from routing.recording.writer import drain
from tests.live.conftest import ROOT, register_peers, serve_code_review

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True)]

QUESTION = "Please review my pull request"


@pytest.fixture
def routed(flowise_config: BackendConfig, langflow_config: BackendConfig, peers) -> Tenant:
    """Both peers registered, discovered and probed; their echo flows serve code review."""
    defaults_load()
    register_peers(flowise_config, langflow_config)
    serve_code_review(peers)
    return Tenant.objects.create(name="Live", slug="live")


def ask(tenant: Tenant, **fields: Any) -> dict[str, Any]:
    try:
        return run_sync(answer_question, query_request(fields), tenant=tenant)
    finally:
        drain()


def test_a_question_is_routed_to_the_best_real_backend(routed: Tenant) -> None:
    body = ask(routed, question=QUESTION)

    assert body["answer"] == f"Echo: {QUESTION}"
    assert body["routing"]["backend"] == "flowise-live"
    assert body["routing"]["intent"] == "code-review"
    assert RoutingDecision.objects.get().outcome == "success"


def test_an_explicit_backend_is_used_as_asked(routed: Tenant) -> None:
    body = ask(routed, question=QUESTION, backend="langflow")

    assert body["answer"] == f"Echo: {QUESTION}"
    assert body["routing"]["backend"] == "langflow-live"


def test_a_conversation_moves_between_real_backends_with_its_history(routed: Tenant) -> None:
    first = ask(routed, question=QUESTION)

    second = ask(
        routed, question="and the tests?", backend="langflow", session_id=first["session_id"]
    )

    assert second["routing"]["backend"] == "langflow-live"
    assert QUESTION in second["answer"]  # the echo flow answers with what it received
    assert second["answer"].endswith("User: and the tests?")


def test_streaming_through_real_backends(routed: Tenant) -> None:
    async def run() -> list[dict[str, Any]]:
        request = query_request({"question": QUESTION, "parameters": {"stream": True}})
        return [e async for e in stream_answer(request, tenant=routed)]

    events = run_sync(run)
    drain()

    assert events[-1]["event"] == "end"
    assert "".join(e["text"] for e in events if e["event"] == "chunk") == f"Echo: {QUESTION}"


def _peers(action: str, name: str) -> None:
    subprocess.run([str(ROOT / "scripts" / "peers" / f"{action}.sh"), name], check=True)  # noqa: S603


def test_it_falls_back_to_langflow_while_flowise_is_stopped(routed: Tenant) -> None:
    _peers("stop", "flowise")
    try:
        body = ask(routed, question=QUESTION)
    finally:
        _peers("start", "flowise")

    chain = body["routing"]["fallback_chain"]
    assert body["answer"] == f"Echo: {QUESTION}"
    assert body["routing"]["backend"] == "langflow-live"
    assert [(a["backend"], a["ok"]) for a in chain] == [
        ("flowise-live", False),
        ("langflow-live", True),
    ]
    assert chain[0]["error_type"] == "ConnectionError"
    assert RoutingDecision.objects.get().outcome == "fallback"

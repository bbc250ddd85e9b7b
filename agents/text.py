"""The readable text of each tool's result (MCP ``content``), beside its structured content.

Plain functions from the service bodies to Markdown-ish text, for a model or a
person to read; the structured content carries the same facts as data.
universal_query's text is seed 000's "Response Format".
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence, Sized
from typing import Any

# Seed 000 heads an answer with its intent ("✅ **Creative Orientation Guidance**").
INTENT_LABELS = {
    "creative-orientation": "Creative Orientation Guidance",
    "technical-analysis": "Technical Analysis",
    "document-qa": "Document Q&A",
    "code-review": "Code Review",
    "summarize": "Conversation Summary",
    "conversation-query": "About This Conversation",
    "general": "General",
}


def intent_label(intent: str) -> str:
    """An intent's heading: the shipped ones by name, others from their slug."""
    return INTENT_LABELS.get(intent) or intent.replace("-", " ").replace("_", " ").title()


def milliseconds(value: float | None) -> str:
    return "n/a" if value is None else f"{round(value):,}ms"


def _selection(routing: Mapping[str, Any]) -> str:
    method = routing.get("routing_method")
    score = routing.get("score")
    scored = f" (score: {score:.2f})" if isinstance(score, int | float) else ""
    if method == "local":
        return "From the conversation (no backend)"
    return ("Intelligent" if method == "auto" else "Explicit") + scored


def _why_intent(routing: Mapping[str, Any]) -> list[str]:
    said = (routing.get("evidence") or {}).get("summary")
    return [f"- Why {routing['intent']}: {said}"] if said else []


def _routing_lines(routing: Mapping[str, Any], session_id: str) -> list[str]:
    timings = routing.get("timings") or {}
    execution = timings.get("execute_ms", timings.get("total_ms"))
    lines = [
        f"- Backend: {routing.get('backend') or 'none'}",
        f"- Flow: {routing.get('flow') or 'none'}",
        f"- Selection: {_selection(routing)}",
        f"- Execution: {milliseconds(execution)}",
        f"- Session: {session_id}",
    ]
    chain = routing.get("fallback_chain") or []
    if routing.get("fallback_used") and chain:
        tried = " → ".join(
            f"{a['backend']}/{a['flow']} ({'ok' if a['ok'] else a.get('error_type') or 'failed'})"
            for a in chain
        )
        lines.append(f"- Fallback: {tried}")
    lines += _why_intent(routing)  # after seed 000's lines, which clients may parse
    if routing.get("cached"):
        source = routing.get("cached_from") or {}
        lines.append(
            "- Cached: every backend failed; a recent answer from "
            f"{source.get('backend', '?')}/{source.get('flow', '?')} was served"
        )
    return lines


def query_answer(body: Mapping[str, Any]) -> str:
    """Seed 000's format: with routing metadata a heading, the answer and the Routing Info
    block; without it, the answer alone."""
    routing = body.get("routing")
    # A parameter the flow could not take is said whatever the format: it changes the answer.
    warned = [f"⚠️ {warning}" for warning in body.get("warnings") or ()]
    if not routing:
        return "\n".join([str(body["answer"]), *(["", *warned] if warned else [])])
    return "\n".join(
        [
            f"✅ **{intent_label(str(routing['intent']))}**",
            "",
            str(body["answer"]),
            "",
            "---",
            "",
            "**Routing Info**:",
            *_routing_lines(routing, str(body["session_id"])),
            *warned,
        ]
    )


def prediction(body: Mapping[str, Any]) -> str:
    routing = body.get("routing")
    if not routing:
        return f"{body['text']}\n\n---\nSession: {body['sessionId']}"
    return "\n".join(
        [
            str(body["text"]),
            "",
            "---",
            "",
            "**Run Info**:",
            *_routing_lines(routing, str(body["sessionId"])),
        ]
    )


def route_plan(plan: Mapping[str, Any]) -> str:
    lines = [
        f"Intent: {plan['intent']} ({plan['method']}, confidence {plan['confidence']:.2f})",
    ]
    said = (plan.get("evidence") or {}).get("summary")
    if said:
        lines.append(f"Because: {said}")
    if plan.get("query_type"):
        lines.append(f"Query type: {plan['query_type']}")
    candidates = plan.get("candidates") or []
    if candidates:
        lines.append("Candidates, best first:")
        lines += [
            f"{i}. {c['backend']}/{c['flow']}: score {c['score']:.2f} "
            f"(match {c['match']:.2f}, health {c['health']:.2f}, "
            f"performance {c['performance']:.2f})"
            for i, c in enumerate(candidates, 1)
        ]
    error = plan.get("error")
    if error:
        lines.append(f"Nothing selectable: {error['type']}: {error['message']}")
    lines.append("(Dry run: nothing was run or recorded.)")
    return "\n".join(lines)


def _count(items: Sized, one: str, many: str) -> str:
    n = len(items)
    return f"{n} {one if n == 1 else many}"


def backends(items: Sequence[Mapping[str, Any]]) -> str:
    if not items:
        return "No backends."
    lines = [f"{_count(items, 'backend', 'backends')}:"]
    for b in items:
        health = b.get("health") or {}
        state = (
            "unknown health"
            if not health
            else ("in cooldown" if health.get("in_cooldown") else "")
            or ("healthy" if health.get("healthy") else "unhealthy")
        )
        owner = "shared" if b.get("shared") else "yours"
        lines.append(f"- {b['name']} (id {b['id']}, {b['kind']}, {owner}, {state})")
    return "\n".join(lines)


def health(outcome: Mapping[str, Any]) -> str:
    if outcome["ok"]:
        return f"{outcome['backend']}: healthy ({milliseconds(outcome.get('latency_ms'))})"
    cooldown = " (in cooldown)" if outcome.get("in_cooldown") else ""
    return f"{outcome['backend']}: unhealthy{cooldown}: {outcome.get('error') or 'no detail'}"


def flows(items: Sequence[Mapping[str, Any]]) -> str:
    if not items:
        return "No flows."
    lines = [f"{_count(items, 'flow', 'flows')}:"]
    lines += [f"- {_flow_line(f)}" for f in items]
    return "\n".join(lines)


def _flow_line(f: Mapping[str, Any]) -> str:
    keywords = ", ".join(f.get("intent_keywords") or []) or "none"
    generic = ", generic" if f.get("is_generic") else ""
    by_hand = " (set by hand)" if f.get("scope_edited") else ""
    return (
        f"{f['name']} (id {f['id']}, {f['backend']}, "
        f"{'deployed' if f['deployed'] else 'not deployed'}{generic}; "
        f"scope: {f.get('scope', 'any')}{by_hand}; intents: {keywords})"
    )


def flow_set(f: Mapping[str, Any]) -> str:
    """set_flow_routing: the flow as routing now uses it."""
    return f"Flow updated: {_flow_line(f)}"


def chatflows(items: Sequence[Mapping[str, Any]]) -> str:
    if not items:
        return "No chatflows."
    lines = [f"{_count(items, 'chatflow', 'chatflows')}:"]
    lines += [f"- {_chatflow_line(c)}" for c in items]
    return "\n".join(lines)


def _chatflow_line(c: Mapping[str, Any]) -> str:
    return (
        f"{c['name']} (id {c['id']}, {c['type']}, "
        f"{'deployed' if c['deployed'] else 'not deployed'}, on {c['backend']})"
    )


def chatflow(c: Mapping[str, Any], *, verb: str = "") -> str:
    """One flow; with its flowData when the body has it (an agent may edit it)."""
    head = f"{verb} {_chatflow_line(c)}".strip()
    lines = [head[0].upper() + head[1:]]
    if c.get("description"):
        lines.append(f"Description: {c['description']}")
    dates = [f"{k}: {c[k]}" for k in ("createdDate", "updatedDate") if c.get(k)]
    if dates:
        lines.append(", ".join(dates))
    if "flowData" in c:
        lines.append(f"flowData: {c['flowData']}")
    return "\n".join(lines)


def deleted(body: Mapping[str, Any]) -> str:
    return f"{body['message']}: {body['deleted_id']}"


def generated(body: Mapping[str, Any]) -> str:
    return (
        f"Generated {body['name']!r} on {body['backend']} (pass flowData to create_chatflow):\n"
        f"flowData: {body['flowData']}"
    )


def session_history(session: Mapping[str, Any]) -> str:
    turns = session["turns"]
    lines = [f"Session {session['id']}: {_count(turns, 'turn', 'turns')}"]
    for i, t in enumerate(turns, 1):
        where = "/".join(x for x in (t.get("backend"), t.get("flow")) if x) or "Flywheel"
        lines += [f"{i}. Q: {t['question']}", f"   A ({t['intent']}, {where}): {t['answer']}"]
    return "\n".join(lines)


def sessions(items: Sequence[Mapping[str, Any]]) -> str:
    if not items:
        return "No sessions."
    lines = [f"{_count(items, 'session', 'sessions')}, most recent first:"]
    lines += [
        f"- {s['id']} ({s['turn_count']} turn{'' if s['turn_count'] == 1 else 's'}, last "
        f"{s['updated_at']}): {_short(s['first_question'])}"
        for s in items
    ]
    return "\n".join(lines)


def _short(text: str, limit: int = 80) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def error(body: Mapping[str, Any]) -> str:
    """An error result's text: the error shape itself, as JSON."""
    return json.dumps(body, ensure_ascii=False)

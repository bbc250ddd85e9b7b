"""Routing decision in process: classify + score, warm cache, 50 flows on 4 backends.

Prints p50/p99 over 10,000 questions (the labelled sets, cycled). No network,
no database: the rules are the shipped defaults, the learned classifiers are
trained on the shipped examples (as load_defaults trains them), and the
routing state is built in memory the way routing.selection.state builds it from the
published snapshot. Classification is the whole cascade short of the LLM.
"""

from __future__ import annotations

import json
import os
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "flywheel.settings")
os.environ.setdefault("CACHE_URL", "locmemcache://")

import django

django.setup()

from bench.common import questions, summary  # noqa: E402
from routing.classification.cascade import cascade, settle  # noqa: E402
from routing.classification.learned import LearnedModel, train  # noqa: E402
from routing.classification.query_type import below_threshold, type_cascade  # noqa: E402
from routing.classification.rules import default_rules  # noqa: E402
from routing.classification.training import SHIPPED_DIR  # noqa: E402
from routing.selection.planning import plan  # noqa: E402
from routing.selection.scoring import BackendEntry, FlowEntry, HealthEntry, PolicyValues  # noqa: E402
from routing.selection.state import RoutingState  # noqa: E402

INTENTS = ["creative-orientation", "technical-analysis", "document-qa", "code-review", "summarize"]
N = 10_000


def build_state() -> RoutingState:
    backends = []
    flow_id = 0
    for b in range(4):
        flows = []
        for f in range(50 // 4 + (1 if b < 50 % 4 else 0)):
            flow_id += 1
            keywords = [INTENTS[(b + f) % len(INTENTS)], *[f"kw{i}" for i in range(f % 8)]]
            flows.append(
                FlowEntry(
                    id=flow_id,
                    backend_id=b + 1,
                    external_id=f"flow-{flow_id}",
                    name=f"flow {flow_id}",
                    keywords=frozenset(keywords),
                    keyword_count=len(keywords),
                    is_generic=f == 0,
                )
            )
        backends.append(
            BackendEntry(id=b + 1, name=f"b{b}", kind="flowise", flows=tuple(flows), version="1")
        )
    return RoutingState(
        backends=tuple(backends),
        health={b.id: HealthEntry(True) for b in backends},
        policy=PolicyValues(),
        rules=default_rules(),
        intent_model=shipped_model("intents.jsonl", "intent"),
        type_model=shipped_model("query_types.jsonl", "query_type"),
    )


def shipped_model(name: str, label: str) -> LearnedModel:
    rows = [json.loads(line) for line in (SHIPPED_DIR / name).read_text().splitlines() if line]
    return train([r["text"] for r in rows], [r[label] for r in rows])


def main() -> None:
    state = build_state()
    pool = questions()
    if sum(len(b.flows) for b in state.backends) != 50:
        raise SystemExit("the benchmark world must hold 50 flows")
    now = datetime.now(UTC)
    timings: list[float] = []
    for i in range(N + 200):
        question = pool[i % len(pool)]
        started = time.perf_counter()
        intent = settle(cascade(state.rules, state.intent_model, question, [], 0.7), 0.7)
        plan(
            state,
            tenant_id=None,
            intent=intent.intent,
            global_weight=None,
            preference="auto",
            now=now,
        )
        elapsed = (time.perf_counter() - started) * 1000
        if i >= 200:  # the first ones warm the performance memo and caches
            timings.append(elapsed)
    print(f"routing decision (classify + score, 50 flows on 4 backends), ms: {summary(timings)}")
    query_type: list[float] = []
    for i in range(N):
        started = time.perf_counter()
        below_threshold(type_cascade(state.rules, state.type_model, pool[i % len(pool)], 0.7), 0.7)
        query_type.append((time.perf_counter() - started) * 1000)
    print(f"query type, rules then model (seed 004 AC 5: < 10 ms), ms: {summary(query_type)}")
    model = state.intent_model
    if model is None:
        raise SystemExit("the benchmark needs the learned intent model")
    alone: list[float] = []
    for i in range(N):
        started = time.perf_counter()
        model.predict(pool[i % len(pool)])
        alone.append((time.perf_counter() - started) * 1000)
    print(f"the learned intent model alone, ms: {summary(alone)}")
    with_type: list[float] = []
    for i in range(N):
        question = pool[i % len(pool)]
        started = time.perf_counter()
        intent = settle(cascade(state.rules, state.intent_model, question, [], 0.7), 0.7)
        decided = below_threshold(type_cascade(state.rules, state.type_model, question, 0.7), 0.7)
        plan(
            state,
            tenant_id=None,
            intent=intent.intent,
            global_weight=decided.global_weight,
            preference="auto",
            now=now,
        )
        with_type.append((time.perf_counter() - started) * 1000)
    print(
        "routing decision with query type (seed 004 AC 7: < 50 ms in all), ms: "
        f"{summary(with_type)}"
    )


if __name__ == "__main__":
    main()

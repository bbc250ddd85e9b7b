"""Measure classification on the labelled sets: rules alone, the learned model alone, the cascade.

For each intent set (tests/data/intent_*.jsonl) and query-type set
(tests/data/querytype_*.jsonl): the accuracy of the shipped rules, of the
model learned from the shipped examples (routing/classification/examples/, trained here as
load_defaults trains it) and of the cascade a query runs without an LLM
(rules when confident, else the model when sure enough, else general /
HYBRID), then the cascade's confusion matrix (rows: the label, columns: what
it said) and, with --misses, each question it got wrong.

Usage: .venv/bin/python scripts/intent_eval.py [SET.jsonl ...] [--misses] [--no-matrix]
(make eval runs it on every set). No database: the rules are the shipped defaults.
"""

from __future__ import annotations

import json
import os
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "flywheel.settings")

import django  # noqa: E402

django.setup()

from routing.classification.cascade import cascade, classify_by_rules, settle  # noqa: E402
from routing.classification.learned import LearnedModel, train  # noqa: E402
from routing.classification.query_type import (  # noqa: E402
    below_threshold,
    classify_query_type,
    type_cascade,
)
from routing.classification.rules import IntentRuleSet, default_rules  # noqa: E402
from routing.classification.training import SHIPPED_DIR  # noqa: E402

THRESHOLD = 0.7  # the routing policy's and QUERY_ROUTING_CONFIDENCE_THRESHOLD's default

Classifier = Callable[[str], str]


def shipped_model(name: str, label: str) -> LearnedModel:
    rows = [json.loads(line) for line in (SHIPPED_DIR / name).read_text().splitlines() if line]
    return train([r["text"] for r in rows], [r[label] for r in rows])


def intent_classifiers(rules: IntentRuleSet, model: LearnedModel) -> dict[str, Classifier]:
    return {
        "rules": lambda q: settle(classify_by_rules(rules, q), THRESHOLD).intent,
        "model": lambda q: model.predict(q).label,
        "cascade": lambda q: settle(cascade(rules, model, q, [], THRESHOLD), THRESHOLD).intent,
    }


def type_classifiers(rules: IntentRuleSet, model: LearnedModel) -> dict[str, Classifier]:
    def typed(question: str) -> str:
        return below_threshold(
            type_cascade(rules, model, question, THRESHOLD), THRESHOLD
        ).query_type

    return {
        "rules": lambda q: below_threshold(classify_query_type(rules, q), THRESHOLD).query_type,
        "model": lambda q: model.predict(q).label,
        "cascade": typed,
    }


def evaluate(
    path: Path, label: str, classifiers: dict[str, Classifier], *, misses: bool, matrix: bool
) -> dict[str, float]:
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    accuracy: dict[str, float] = {}
    said: dict[str, list[str]] = {}
    for name, classify in classifiers.items():
        said[name] = [classify(row["question"]) for row in rows]
        right = sum(s == row[label] for s, row in zip(said[name], rows, strict=True))
        accuracy[name] = right / len(rows)
    figures = "  ".join(f"{name} {value:6.1%}" for name, value in accuracy.items())
    print(f"{path.name:<28} n={len(rows):<4} {figures}")
    if matrix:
        labels = sorted({row[label] for row in rows} | set(said["cascade"]))
        pairs = Counter(zip((r[label] for r in rows), said["cascade"], strict=True))
        width = max(len(x) for x in labels)
        print(f"    {'':<{width}}  " + " ".join(f"{x[:6]:>6}" for x in labels))
        for want in labels:
            cells = " ".join(f"{pairs[(want, got)] or '.':>6}" for got in labels)
            print(f"    {want:<{width}}  {cells}")
    if misses:
        for row, got in zip(rows, said["cascade"], strict=True):
            if got != row[label]:
                print(f"    want {row[label]:<20} got {got:<20} {row['question'][:100]!r}")
    return accuracy


def main() -> None:
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    misses, matrix = "--misses" in sys.argv, "--no-matrix" not in sys.argv
    paths = [Path(a) for a in args] or sorted((ROOT / "tests/data").glob("*.jsonl"))
    rules = default_rules()
    intents = [p for p in paths if p.name.startswith("intent_")]
    types = [p for p in paths if p.name.startswith("querytype_")]
    if intents:
        model = shipped_model("intents.jsonl", "intent")
        print(f"Intents (model: {model.examples} shipped examples, cross-validated "
              f"{model.accuracy:.1%})")  # fmt: skip
        for path in intents:
            evaluate(path, "intent", intent_classifiers(rules, model), misses=misses, matrix=matrix)
    if types:
        model = shipped_model("query_types.jsonl", "query_type")
        print(f"Query types (model: {model.examples} shipped examples, cross-validated "
              f"{model.accuracy:.1%})")  # fmt: skip
        for path in types:
            evaluate(
                path, "query_type", type_classifiers(rules, model), misses=misses, matrix=matrix
            )


if __name__ == "__main__":
    main()

"""Evaluate the shipped intent rules on a labelled set: accuracy and the misses.

Usage: .venv/bin/python scripts/intent_eval.py tests/data/intent_dev.jsonl [--misses]
"""

from __future__ import annotations

import json
import os
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "flywheel.settings")

import django

django.setup()

from routing.classify import classify_by_rules, settle  # noqa: E402
from routing.rules import default_rules  # noqa: E402

THRESHOLD = 0.7


def main() -> None:
    path = Path(sys.argv[1])
    show = "--misses" in sys.argv
    rules = default_rules()
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    hits = 0
    per: Counter[str] = Counter()
    right: Counter[str] = Counter()
    for row in rows:
        result = settle(classify_by_rules(rules, row["question"]), THRESHOLD)
        per[row["intent"]] += 1
        if result.intent == row["intent"]:
            hits += 1
            right[row["intent"]] += 1
        elif show:
            print(
                f"want {row['intent']:<21} got {result.intent:<21} {result.confidence:.2f} "
                f"{result.scores} | {row['question'][:110]!r}"
            )
    print(f"{path.name}: {hits}/{len(rows)} = {hits / len(rows):.1%}")
    for intent in sorted(per):
        print(f"  {intent:<22} {right[intent]}/{per[intent]}")


if __name__ == "__main__":
    main()

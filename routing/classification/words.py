"""Why a question got its intent or query type, in words a person reads.

The raw evidence (the patterns that matched, the model's version) stays with the
decision for whoever needs it; these sentences say the same thing as a person would:
"matched 'review' and 'pull request' (code-review rules 1 and 3)", "the learned model
(v4): 0.91 code-review, 0.05 technical-analysis".
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from routing.classification.rules import CompiledRule

MATCH_SHOWN = 40  # characters of a matched passage quoted


def listed(items: Iterable[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    items = list(items)
    if len(items) < 2:
        return "".join(items)
    return f"{', '.join(items[:-1])} and {items[-1]}"


def matched_text(rule: CompiledRule, question: str) -> str:
    """The passage of ``question`` that ``rule`` matched, quoted (its pattern when, oddly,
    it no longer matches)."""
    found: Any = rule.matcher.search(question)
    text = " ".join(found.group(0).split()) if found is not None else rule.pattern
    if len(text) > MATCH_SHOWN:
        text = text[: MATCH_SHOWN - 1] + "…"
    return f"'{text}'"


def matched(rules: Sequence[CompiledRule], question: str) -> str:
    """The distinct passages ``rules`` matched, those inside another left out: "'review'
    and 'my pull request'" (not also 'pull request')."""
    passages = list(dict.fromkeys(matched_text(rule, question) for rule in rules))
    return listed(p for p in passages if not any(p != q and p.strip("'") in q for q in passages))


def said_by_rules(intent: str, hits: Sequence[CompiledRule], question: str) -> str:
    """ "matched 'review' and 'pull request' (code-review rules 1 and 3)": the numbers are
    the rules' places on the intent's admin page."""
    numbers = [str(rule.number) for rule in hits if rule.number]
    which = f" {'rules' if len(numbers) > 1 else 'rule'} {listed(numbers)}" if numbers else ""
    return f"matched {matched(hits, question)} ({intent}{which or ' rules'})"


def said_by_model(
    version: int, probabilities: Mapping[str, float], *, voted: bool, shown: int = 2
) -> str:
    """ "the learned model (v4): 0.91 code-review, 0.05 technical-analysis"."""
    top = sorted(probabilities.items(), key=lambda kv: (-kv[1], kv[0]))[:shown]
    nearest = " with the nearest examples" if voted else ""
    return f"the learned model (v{version}{nearest}): " + ", ".join(
        f"{p:.2f} {label}" for label, p in top
    )


def said_in_context(question: str, intent: str) -> str:
    shown = question if len(question) <= 80 else question[:79] + "…"
    return f"a follow-up of “{shown}”, which was {intent}"


def unsure(intent: str, confidence: float, threshold: float, fallback: str, why: str) -> str:
    """No step was sure: the answer falls back to ``fallback``."""
    if not why or intent == fallback:
        return f"nothing was sure enough, so {fallback}" + (f" ({why})" if why else "")
    return (
        f"{why}, but {intent} at {confidence:.2f} is under the {threshold:.2f} threshold, "
        f"so {fallback}"
    )

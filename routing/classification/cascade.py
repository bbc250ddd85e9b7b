"""Intent classification: rules, conversation context, a model learned from examples, an LLM.

Pure functions over plain values: the compiled rules, the session's recent
turns and the policy's threshold go in; a frozen IntentResult comes out.
The LLM step lives in routing.classification.llm and is awaited by the query service only
when the rules and the context leave the confidence below the threshold.
"""

from __future__ import annotations

import math
import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from routing.classification import words
from routing.classification.learned import LearnedModel
from routing.classification.rules import CompiledRule, IntentRuleSet

FALLBACK_INTENT = "general"
# Matched rule weight at which confidence reaches 1 - 1/e (~0.63); a single
# strong rule (2.5) clears the default 0.7 threshold, a weak one (1.0) does not.
STRENGTH_SCALE = 1.7
CONTEXT_CONFIDENCE = 0.75
# The learned model's answer stands from this probability on (chosen on the tuning sets,
# dev, holdout and unseen); below it the LLM, if configured, or ``general`` decides.
MODEL_CONFIDENCE = 0.45
# Too few words to learn from: "test" or "question 7" get no label from the model.
MODEL_MIN_WORDS = 3
FOLLOW_UP_MAX_WORDS = 8
_FOLLOW_UP_START = re.compile(
    r"^\s*(and|also|what about|how about|same|then|but|so|ok(ay)?|now|why|how come|"
    r"in\s+\w+\s*\?|for\s+\w+|or|plus|what if|and if|too)\b",
    re.IGNORECASE,
)
_WORD = re.compile(r"\w+")
_TOKEN = re.compile(r"\w\w+")  # a word as the model counts it: two characters or more


@dataclass(frozen=True)
class Turn:
    """A past turn as the classifier sees it."""

    question: str
    intent: str
    answer: str = ""


@dataclass(frozen=True)
class IntentResult:
    intent: str
    confidence: float
    method: str  # example | rules | context | model | llm | override | default
    evidence: tuple[str, ...] = field(default_factory=tuple)
    scores: dict[str, float] = field(default_factory=dict)
    summary: str = ""  # the evidence in words (routing.classification.words)
    # The ids of the matched rules whose patterns end ``evidence``, in its order (what
    # the decision keeps of them: routing.recording.compact).
    rule_ids: tuple[int, ...] = ()

    def evidence_shown(self) -> dict[str, Any]:
        """The evidence as callers get it: the sentence, and the raw patterns behind it."""
        return {"summary": self.summary, "raw": list(self.evidence)}


def rule_scores(
    rules: IntentRuleSet, question: str
) -> tuple[dict[str, float], dict[str, list[CompiledRule]]]:
    """Summed weights of the matching rules per intent, and the rules that matched."""
    scores: dict[str, float] = {}
    found = rules.matches(question)
    for intent, hits in found.items():
        scores[intent] = round(sum(rule.weight for rule in hits), 4)
    return scores, found


def confidence_of(top: float, runner_up: float) -> float:
    """How sure the rules are: the winner's strength, discounted by a close runner-up.

    A tie halves the strength; a runner-up at half the winner's score costs an eighth.
    """
    if top <= 0:
        return 0.0
    strength = 1 - math.exp(-top / STRENGTH_SCALE)
    closeness = runner_up / top
    return round(strength * (1 - 0.5 * closeness**2), 4)


def classify_by_rules(rules: IntentRuleSet, question: str) -> IntentResult:
    """The best-scoring intent by rules; ``general`` with confidence 0 when nothing matches."""
    scores, hits = rule_scores(rules, question)
    if not scores:
        return IntentResult(FALLBACK_INTENT, 0.0, "rules", summary="no rule matched")
    ranked = sorted(scores, key=lambda i: (scores[i], rules.priorities.get(i, 0), i), reverse=True)
    top = ranked[0]
    runner_up = scores[ranked[1]] if len(ranked) > 1 else 0.0
    return IntentResult(
        intent=top,
        confidence=confidence_of(scores[top], runner_up),
        method="rules",
        evidence=tuple(rule.pattern for rule in hits[top]),
        scores=scores,
        summary=words.said_by_rules(top, hits[top], question),
        rule_ids=tuple(rule.pk for rule in hits[top]),
    )


def is_follow_up(question: str) -> bool:
    """A short, elliptical continuation such as "and in Go?" or "why?"."""
    words = _WORD.findall(question)
    if not words:
        return False
    return len(words) <= FOLLOW_UP_MAX_WORDS and (
        bool(_FOLLOW_UP_START.match(question)) or len(words) <= 3
    )


def classify_with_context(
    rules: IntentRuleSet,
    question: str,
    history: Sequence[Turn],
    threshold: float,
) -> IntentResult:
    """Rules first; a follow-up the rules are unsure of inherits the session's topic.

    ``history`` holds the session's recent turns, oldest first (the last five).
    """
    by_rules = classify_by_rules(rules, question)
    if by_rules.confidence >= threshold or not history or not is_follow_up(question):
        return by_rules
    topic = history[-1]
    if topic.intent not in rules.priorities:
        return by_rules
    return IntentResult(
        intent=topic.intent,
        confidence=max(CONTEXT_CONFIDENCE, by_rules.confidence),
        method="context",
        evidence=(f"follow-up of: {topic.question[:80]}",),
        scores=by_rules.scores,
        summary=words.said_in_context(topic.question, topic.intent),
    )


def by_model(
    model: LearnedModel | None,
    known: Collection[str],
    question: str,
    unsure: IntentResult,
    threshold: float,
    vector: np.ndarray | None = None,
) -> IntentResult:
    """The learned model's intent (method "model"), when there is a model, the question
    has at least MODEL_MIN_WORDS words and the model gives a ``known`` intent at least
    MODEL_CONFIDENCE; else ``unsure`` (what rules and context said). Its answer then
    stands, at no less than ``threshold``: the LLM is not asked. With the question's
    embedding ``vector``, the nearest examples vote too (routing.classification.embeddings)."""
    if model is None or len(_TOKEN.findall(question)) < MODEL_MIN_WORDS:
        return unsure
    predicted = model.predict(question, vector)
    if predicted.confidence < MODEL_CONFIDENCE or predicted.label not in known:
        return unsure
    voted = " with the nearest examples" if predicted.voted else ""
    return IntentResult(
        predicted.label,
        max(predicted.confidence, threshold),
        "model",
        (f"model v{model.version}{voted}: {predicted.label} at {predicted.confidence:.2f}",),
        unsure.scores,
        words.said_by_model(model.version, predicted.probabilities, voted=predicted.voted),
    )


def cascade(
    rules: IntentRuleSet,
    model: LearnedModel | None,
    question: str,
    history: Sequence[Turn],
    threshold: float,
    vector: np.ndarray | None = None,
) -> IntentResult:
    """The cascade up to the LLM: a question a person labelled (an admin's example or a
    corrected decision) gets their label; then rules when confident, the conversation's
    topic for an unsure follow-up, then the learned model when it is sure enough."""
    recalled = model.recall(question) if model is not None else None
    if recalled is not None and recalled in rules.priorities:
        return IntentResult(
            recalled,
            1.0,
            "example",
            ("labelled so by a person",),
            summary=f"a person labelled this very question {recalled}",
        )
    result = classify_with_context(rules, question, history, threshold)
    if result.confidence < threshold:
        result = by_model(model, rules.priorities, question, result, threshold, vector)
    return result


def settle(result: IntentResult, threshold: float) -> IntentResult:
    """Below the threshold, and with nothing better to ask, the answer is ``general`` by
    method "default": no step was sure."""
    if result.confidence >= threshold:
        return result
    evidence = result.evidence
    if result.intent != FALLBACK_INTENT:
        evidence = (f"below threshold: {result.intent} at {result.confidence:.2f}", *evidence)
    summary = words.unsure(
        result.intent, result.confidence, threshold, FALLBACK_INTENT, result.summary
    )
    return IntentResult(
        FALLBACK_INTENT,
        result.confidence,
        "default",
        evidence,
        result.scores,
        summary,
        result.rule_ids,
    )

"""Classifying a question with what routing knows now: its rules, learned models and LLM.

Reads only the in-process RoutingState, except the optional LLM, which is awaited only
when the rules are unsure and an LLM is configured and enabled in the policy.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.conf import settings

from flywheel.errors import ValidationError
from routing.classification import llm
from routing.classification.cascade import (
    MODEL_CONFIDENCE,
    IntentResult,
    Turn,
    cascade,
    classify_by_rules,
    settle,
)
from routing.classification.embeddings import question_vector
from routing.classification.query_type import (
    QueryTypeDecision,
    below_threshold,
    classify_query_type,
    type_cascade,
)
from routing.selection.state import RoutingState


def _labels(state: RoutingState) -> dict[str, str]:
    return {slug: slug.replace("-", " ") for slug in state.rules.priorities}


async def classify_intent(
    state: RoutingState, question: str, history: Sequence[Turn], override: str | None
) -> IntentResult:
    """Intent by override, rules, context, learned model or LLM (the cascade of
    routing.classification.cascade, then the LLM when still unsure). Raises
    ValidationError for an unknown override."""
    if override is not None:
        if override not in state.rules.priorities:
            raise ValidationError(
                f"Unknown or disabled intent {override!r}.",
                details={"intent": override, "known": sorted(state.rules.priorities)},
            )
        return IntentResult(override, 1.0, "override", summary=f"the caller asked for {override}")
    threshold = state.policy.confidence_threshold
    result = cascade(state.rules, state.intent_model, question, history, threshold)
    if result.confidence < threshold or result.method == "model":  # the model was asked
        vector = await question_vector(state.intent_model, question)
        if vector is not None:
            result = cascade(state.rules, state.intent_model, question, history, threshold, vector)
    config = llm.llm_config() if state.policy.llm_classification_enabled else None
    if result.confidence < threshold and config is not None:
        label = await llm.llm_intent(
            config, question, _labels(state), [t.question for t in history]
        )
        if label is not None:
            return IntentResult(
                label,
                llm.LLM_INTENT_CONFIDENCE,
                "llm",
                (f"llm: {label}",),
                result.scores,
                f"the LLM chose {label}: the other steps were unsure"
                + (f" ({result.intent} at {result.confidence:.2f})" if result.confidence else ""),
            )
    return settle(result, threshold)


async def classify_type(state: RoutingState, question: str) -> QueryTypeDecision | None:
    """GLOBAL / LOCAL / HYBRID when query routing is enabled, else None."""
    if not settings.QUERY_ROUTING_ENABLED:
        return None
    return await decide_query_type(state, question)


async def decide_query_type(state: RoutingState, question: str) -> QueryTypeDecision:
    """Rules, then the learned model, then the LLM when unsure (QUERY_ROUTING_USE_LLM and
    an LLM configured), then HYBRID if still below QUERY_ROUTING_CONFIDENCE_THRESHOLD."""
    threshold = settings.QUERY_ROUTING_CONFIDENCE_THRESHOLD
    vector = await question_vector(state.type_model, question)
    decision = type_cascade(state.rules, state.type_model, question, threshold, vector)
    config = llm.query_type_llm_config()
    if decision.confidence < threshold and config is not None:
        answered = await llm.llm_query_type(config, question)
        if answered is not None:
            query_type, confidence, reasoning = answered
            weights = {"GLOBAL": (1.0, 0.0), "LOCAL": (0.0, 1.0)}.get(query_type, (0.5, 0.5))
            decision = QueryTypeDecision(
                query_type,
                confidence,
                reasoning,
                *weights,
                method="llm",
                evidence=decision.evidence,
                rule_ids=decision.rule_ids,
            )
    return below_threshold(decision, threshold)


def classification_explain(state: RoutingState, question: str) -> dict[str, Any]:
    """What each step of the cascade says of ``question`` on its own (no conversation),
    and why, without asking the LLM: for the admin's "try a question", before a pattern
    or an example is saved. Returns {"intent": {...}, "query_type": {...}}, each with
    its ``steps`` (name, verdict, detail) and the ``answer`` the cascade would give."""
    threshold = state.policy.confidence_threshold
    model = state.intent_model
    steps: list[dict[str, str]] = []
    recalled = model.recall(question) if model is not None else None
    steps.append(
        {
            "step": "labelled by a person",
            "verdict": recalled or "—",
            "detail": "an admin example or a correction of exactly this question"
            if recalled
            else "no admin example or correction is this question",
        }
    )
    by_rules = classify_by_rules(state.rules, question)
    matched = ", ".join(f"{i} {s:g}" for i, s in sorted(by_rules.scores.items())) or "none"
    steps.append(
        {
            "step": "rules",
            "verdict": f"{by_rules.intent} at {by_rules.confidence:.2f}"
            + (" (confident)" if by_rules.confidence >= threshold else " (unsure)"),
            "detail": f"weights per intent: {matched}; patterns: "
            + ("; ".join(by_rules.evidence) or "none"),
        }
    )
    if model is None:
        steps.append({"step": "learned model", "verdict": "—", "detail": "no model trained yet"})
    else:
        predicted = model.predict(question)
        top = sorted(predicted.probabilities.items(), key=lambda kv: -kv[1])[:3]
        sure = predicted.confidence >= MODEL_CONFIDENCE
        steps.append(
            {
                "step": "learned model",
                "verdict": f"{predicted.label} at {predicted.confidence:.2f}"
                + (" (sure enough)" if sure else " (unsure)"),
                "detail": f"v{model.version}, {model.examples} examples; "
                + ", ".join(f"{label} {p:.2f}" for label, p in top),
            }
        )
    llm_on = state.policy.llm_classification_enabled and llm.llm_config() is not None
    steps.append(
        {
            "step": "LLM",
            "verdict": "asked when the steps above are unsure" if llm_on else "not configured",
            "detail": "not asked here" if llm_on else "set LLM_BASE_URL to add this step",
        }
    )
    answer = settle(cascade(state.rules, model, question, [], threshold), threshold)
    type_threshold = settings.QUERY_ROUTING_CONFIDENCE_THRESHOLD
    type_rules = classify_query_type(state.rules, question)
    typed = below_threshold(
        type_cascade(state.rules, state.type_model, question, type_threshold), type_threshold
    )
    type_steps = [
        {
            "step": "rules",
            "verdict": f"{type_rules.query_type} at {type_rules.confidence:.2f}",
            "detail": type_rules.reasoning,
        }
    ]
    if state.type_model is not None:
        predicted = state.type_model.predict(question)
        type_steps.append(
            {
                "step": "learned model",
                "verdict": f"{predicted.label} at {predicted.confidence:.2f}",
                "detail": ", ".join(f"{k} {v:.2f}" for k, v in predicted.probabilities.items()),
            }
        )
    return {
        "intent": {
            "steps": steps,
            "answer": {
                "intent": answer.intent,
                "method": answer.method,
                "confidence": answer.confidence,
            },
        },
        "query_type": {
            "steps": type_steps,
            "answer": {
                "query_type": typed.query_type,
                "method": typed.method,
                "confidence": typed.confidence,
                "reasoning": typed.reasoning,
            },
        },
    }

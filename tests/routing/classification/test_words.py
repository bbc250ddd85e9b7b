"""The intent and query type evidence in words: what the question said and which rule
heard it, the model's leading probabilities, why an unsure answer fell back."""

from __future__ import annotations

import pytest
from asgiref.sync import async_to_sync

from routing.answering.classify import classify_intent
from routing.classification.cascade import (
    Turn,
    classify_by_rules,
    classify_with_context,
    settle,
)
from routing.classification.query_type import classify_query_type
from routing.classification.rules import intent_rules
from routing.classification.words import listed, said_by_model
from routing.install import defaults_load
from routing.models import Intent, IntentPattern
from routing.selection.state import routing_state

pytestmark = pytest.mark.django_db(transaction=True)

THRESHOLD = 0.7


@pytest.fixture(autouse=True)
def _defaults(db) -> None:
    defaults_load()


def test_rules_say_the_words_they_matched_and_their_places_on_the_admin_page() -> None:
    """The intent page lists its rules by weight, then pattern, disabled ones too: the
    numbers are those places, so an admin finds the rule at once."""
    astrology = Intent.objects.create(slug="astrology", name="Astrology", priority=5)
    for pattern, weight, enabled in [
        ("horoscope", 3.0, True),  # 1
        ("star sign", 2.5, False),  # 2, disabled
        (r"\b(zodiac|natal)\s+chart\b", 2.0, True),  # 3
        ("tarot", 1.0, True),  # 4, does not match
    ]:
        IntentPattern.objects.create(
            intent=astrology,
            pattern=pattern,
            weight=weight,
            enabled=enabled,
            kind="regex" if "\\" in pattern else "keyword",
        )

    result = classify_by_rules(intent_rules(), "Read my HOROSCOPE from my Natal   chart")

    assert result.intent == "astrology"
    assert result.summary == "matched 'HOROSCOPE' and 'Natal chart' (astrology rules 1 and 3)"
    assert result.evidence == ("horoscope", r"\b(zodiac|natal)\s+chart\b")  # kept raw


def test_a_passage_inside_another_is_said_once() -> None:
    result = classify_by_rules(intent_rules(), "Please review my pull request")

    assert result.summary.startswith("matched 'my pull request' and 'review' (code-review rules ")


def test_a_question_no_rule_matched_says_so_and_why_it_is_general() -> None:
    result = settle(classify_by_rules(intent_rules(), "what's the capital of Peru?"), THRESHOLD)

    assert result.summary == "nothing was sure enough, so general (no rule matched)"


def test_an_unsure_rule_says_what_it_heard_and_the_threshold_it_missed() -> None:
    unsure = classify_by_rules(intent_rules(), "a critique, please")
    assert 0 < unsure.confidence < THRESHOLD  # one weak rule

    result = settle(unsure, THRESHOLD)

    assert result.summary == (
        f"{unsure.summary}, but {unsure.intent} at {unsure.confidence:.2f} is under the "
        "0.70 threshold, so general"
    )


def test_a_follow_up_names_the_question_it_follows() -> None:
    history = [Turn("Compare Postgres and MySQL for write-heavy workloads", "technical-analysis")]

    result = classify_with_context(intent_rules(), "and in Go?", history, THRESHOLD)

    assert result.summary == (
        "a follow-up of “Compare Postgres and MySQL for write-heavy workloads”, "
        "which was technical-analysis"
    )


def test_the_model_gives_its_two_leading_probabilities() -> None:
    said = said_by_model(
        4, {"general": 0.01, "code-review": 0.914, "technical-analysis": 0.05}, voted=False
    )

    assert said == "the learned model (v4): 0.91 code-review, 0.05 technical-analysis"
    assert said_by_model(2, {"a": 0.5}, voted=True) == (
        "the learned model (v2 with the nearest examples): 0.50 a"
    )


def test_a_named_intent_says_the_caller_chose_it() -> None:
    chosen = async_to_sync(classify_intent)(routing_state(), "hello", [], "document-qa")

    assert chosen.summary == "the caller asked for document-qa"


def test_query_type_reasoning_quotes_the_question_not_the_patterns() -> None:
    decision = classify_query_type(
        intent_rules(), "Summarize the overall themes across all our documents"
    )

    assert decision.query_type == "GLOBAL"
    assert "matched '" in decision.reasoning
    assert not any(p in decision.reasoning for ps in decision.evidence.values() for p in ps)


def test_listed_joins_as_a_person_would() -> None:
    assert [listed([]), listed(["a"]), listed(["a", "b"]), listed(["a", "b", "c"])] == [
        "",
        "a",
        "a and b",
        "a, b and c",
    ]

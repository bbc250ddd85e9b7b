"""Rule patterns: refused when unsafe or invalid; matched case-insensitively by RE2."""

from __future__ import annotations

import json
import random

import pytest
from django.core.exceptions import ValidationError

from routing.classification.rules import build_rules, default_rules
from routing.classification.shipped import DEFAULT_INTENTS, DEFAULT_SCOPE_PATTERNS
from routing.patterns import compile_pattern, validate_keyword, validate_regex
from tests.paths import DATA


@pytest.mark.parametrize(
    "pattern",
    ["(a+)+$", "(a*)*b", r"(\w+\s?)+$", "(?:x|y+)*z", "(a{1,5}){1,20}"],
)
def test_nested_repetition_is_refused(pattern: str) -> None:
    with pytest.raises(ValidationError, match="backtrack catastrophically"):
        validate_regex(pattern)


@pytest.mark.parametrize(
    ("pattern", "reason"),
    [
        ("what is (", "Not a valid regular expression"),
        (r"(a)\1", "Not a valid regular expression"),  # backreferences: RE2 has none
        ("(?=look)ahead", "Not a valid regular expression"),
        ("", "empty"),
        ("x" * 2001, "longer than"),
    ],
)
def test_invalid_patterns_are_refused_with_a_reason(pattern: str, reason: str) -> None:
    with pytest.raises(ValidationError, match=reason):
        validate_regex(pattern)


@pytest.mark.parametrize(
    "pattern", [r"\bwho (is|was)\b", r"(foo|bar)+", r"\b(section|page) \d+", r"(?:\s+\w+){0,3}"]
)
def test_ordinary_patterns_are_accepted(pattern: str) -> None:
    validate_regex(pattern)


def test_every_shipped_pattern_is_valid() -> None:
    patterns = [p for intent in DEFAULT_INTENTS for p in intent.patterns]
    patterns += [p for group in DEFAULT_SCOPE_PATTERNS.values() for p in group]
    for pattern in patterns:
        (validate_regex if pattern.is_regex else validate_keyword)(pattern.pattern)


def test_keywords_match_whole_words_ignoring_case_and_spacing() -> None:
    matcher = compile_pattern("code review", is_regex=False)

    assert matcher.search("Could you do a Code   Review of this?")
    assert not matcher.search("encode reviewers")


def test_keywords_are_literal_text() -> None:
    matcher = compile_pattern("c++ (beta)", is_regex=False)

    assert matcher.search("is c++ (beta) out")
    assert not matcher.search("is ccc beta out")


def test_regexes_match_ignoring_case() -> None:
    assert compile_pattern(r"\bsummari[sz]e\b", is_regex=True).search("Please SUMMARISE")


def _every_question() -> list[str]:
    found: list[str] = []
    for path in sorted(DATA.glob("intent_*.jsonl")):
        found += [json.loads(line)["question"] for line in path.read_text().splitlines() if line]
    return found


def test_the_rule_set_finds_exactly_what_each_rule_finds() -> None:
    """One pass over the text (RE2::Set) must agree with asking every rule in turn,
    on every labelled question and on long, repetitive ones."""
    rules = default_rules()
    rng = random.Random(7)  # noqa: S311 - repeatable test text, not secrets
    words = [
        "what",
        "where",
        "how",
        "does",
        "say",
        "mention",
        "extract",
        "from",
        "in",
        "list",
        "the",
        "review",
        "bug",
        "all",
        "this",
    ]
    long_ones = [" ".join(rng.choice(words) for _ in range(2000))[:10000] for _ in range(10)]
    long_ones += ["what " * 1999 + "say", "extract " * 1249 + "from", "x" * 10000]
    questions = _every_question() + long_ones
    assert len(questions) > 500
    for question in questions:
        one_by_one = {
            intent: [rule for rule in intent_rules if rule.matcher.search(question)]
            for intent, intent_rules in rules.rules.items()
        }
        assert rules.matches(question) == {k: v for k, v in one_by_one.items() if v}, question


def test_an_empty_rule_set_matches_nothing() -> None:
    assert build_rules(1, {"general": (0, [])}, {}).matches("anything at all") == {}

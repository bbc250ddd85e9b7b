"""The intents, rule patterns and scope patterns Flywheel ships with.

Plain data: `routing.install.defaults_load` installs it. Patterns are written
for meaning (the verbs and nouns people use for a kind of request), matched
case-insensitively by RE2; keywords match whole words.
"""

from __future__ import annotations

from routing.classification.shipped.base import DefaultIntent, DefaultPattern, regex
from routing.classification.shipped.conversation import CONVERSATION_QUERY, SUMMARIZE
from routing.classification.shipped.topics import CODE_REVIEW, CREATIVE, DOCUMENT_QA, TECHNICAL

__all__ = ["DEFAULT_INTENTS", "DEFAULT_SCOPE_PATTERNS", "DefaultIntent", "DefaultPattern"]

DEFAULT_INTENTS: tuple[DefaultIntent, ...] = (
    CREATIVE,
    TECHNICAL,
    DOCUMENT_QA,
    CODE_REVIEW,
    SUMMARIZE,
    CONVERSATION_QUERY,
    DefaultIntent(
        slug="general",
        name="General",
        description="Anything else; the intent used when no rule is confident.",
        priority=-10,
    ),
)

# Seed 004: GLOBAL questions need corpus-wide understanding, LOCAL ones a
# specific entity or fact.
DEFAULT_SCOPE_PATTERNS: dict[str, tuple[DefaultPattern, ...]] = {
    "global": (
        regex(r"\bwhat are the (main|primary|key|major|common|recurring) \w+", 2.0),
        regex(r"\b(summary|summari[sz]e|overview|big picture|high[- ]level)\b", 1.5),
        regex(r"\ball (the )?(types|kinds|categories|themes|topics)\b", 1.5),
        regex(r"\bhow many (in )?(total|overall)\b|\b(total|overall) (number|count)\b", 1.5),
        regex(r"\b(general|overall) understanding\b", 1.5),
        regex(r"\b(themes?|trends?|patterns?) (across|in|throughout)\b", 1.5),
        regex(r"\bacross (all|the whole|the entire|every)\b", 1.0),
    ),
    "local": (
        regex(r"\bwhat (is|was) (the |a |an )?[a-z0-9_]", 1.5),
        regex(r"\bwho (is|was)\b", 1.5),
        regex(r"\bwhere (is|does|did|was)\b", 1.5),
        regex(r"\bwhen (did|was|is|does)\b", 1.5),
        regex(r"\b(specific|particular|exact|exactly)\b", 1.5),
        regex(
            r"\b(this|that) (function|class|method|entity|file|document|person|company|"
            r"endpoint|table|module)\b",
            1.5,
        ),
        regex(r"\bdefin(e|ition of)\b", 1.0),
    ),
}

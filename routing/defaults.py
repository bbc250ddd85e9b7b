"""The intents, rule patterns and scope patterns Flywheel ships with.

Plain data: `routing.services.defaults_load` installs it. Patterns are written
for meaning (the verbs and nouns people use for a kind of request), matched
case-insensitively by RE2; keywords match whole words.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class DefaultPattern:
    pattern: str
    weight: float = 1.0
    is_regex: bool = False


@dataclass(frozen=True)
class DefaultIntent:
    slug: str
    name: str
    description: str
    priority: int = 0
    patterns: tuple[DefaultPattern, ...] = field(default_factory=tuple)


def _kw(*keywords: str, weight: float = 1.0) -> tuple[DefaultPattern, ...]:
    return tuple(DefaultPattern(k, weight) for k in keywords)


def _re(pattern: str, weight: float = 1.0) -> DefaultPattern:
    return DefaultPattern(pattern, weight, is_regex=True)


DEFAULT_INTENTS: tuple[DefaultIntent, ...] = (
    DefaultIntent(
        slug="creative-orientation",
        name="Creative orientation",
        description="Creating outcomes: vision, structural tension, brainstorming, "
        "creative writing and ideation.",
        patterns=(
            *_kw("structural tension", "creative orientation", "desired outcome", weight=3.0),
            *_kw("current reality", "creative process", "brainstorm", "ideation", weight=2.0),
            *_kw("vision", "imagine", "inspiration", "creative", weight=1.0),
            _re(
                r"\b(write|compose|draft|create)\b.{0,40}\b(story|poem|song|lyrics|script|"
                r"slogan|tagline|haiku|novel|plot)s?\b",
                2.5,
            ),
            _re(r"\b(ideas|names|themes) for\b", 1.5),
        ),
    ),
    DefaultIntent(
        slug="technical-analysis",
        name="Technical analysis",
        description="Analysing systems: architecture, performance, trade-offs, "
        "root causes and comparisons.",
        patterns=(
            *_kw("architecture", "system design", "root cause", "bottleneck", weight=2.0),
            *_kw("scalability", "throughput", "latency", "trade-off", "trade-offs", weight=2.0),
            *_kw("benchmark", "performance", "infrastructure", "protocol", weight=1.5),
            _re(r"\banaly[sz](e|is|ing)\b", 1.5),
            _re(r"\b(compare|comparison|versus|vs\.?)\b", 1.0),
            _re(r"\bwhy (is|does|do|did)\b.{0,60}\b(slow|fail|crash|leak|time out|timeout)", 2.0),
        ),
    ),
    DefaultIntent(
        slug="document-qa",
        name="Document Q&A",
        description="Answering from documents: reports, manuals, contracts, papers, pages.",
        patterns=(
            *_kw("according to", "the document", "the attached", "this pdf", weight=2.5),
            _re(
                r"\b(in|from) (the|this|that|my|our) (report|paper|manual|contract|policy|"
                r"handbook|document|pdf|file|article|spec|specification)\b",
                2.5,
            ),
            _re(r"\b(section|chapter|page|clause|appendix) \d+", 2.0),
            *_kw("document", "pdf", "handbook", "manual", "whitepaper", weight=1.0),
        ),
    ),
    DefaultIntent(
        slug="code-review",
        name="Code review",
        description="Reviewing code: bugs, style, refactoring, pull requests.",
        patterns=(
            *_kw("code review", "pull request", "code smell", "refactor", weight=3.0),
            _re(
                r"\b(review|check|audit|critique|improve)\b.{0,30}\b(code|function|class|"
                r"method|diff|patch|snippet|script|implementation)\b",
                3.0,
            ),
            _re(r"```", 2.0),
            _re(r"\b(def|function|class|const|let|var|fn|func) [a-z_]\w*", 1.5),
            *_kw("linter", "unit test", "type hints", "naming", weight=1.0),
        ),
    ),
    DefaultIntent(
        slug="summarize",
        name="Summarize the conversation",
        description="Summarise the last answers of this session.",
        priority=10,
        patterns=(
            _re(
                r"\b(summari[sz]e|sum up|recap)\b.{0,40}\b(conversation|chat|discussion|"
                r"so far|above|that|this|your (answers?|responses?)|what you said)\b",
                4.0,
            ),
            _re(r"\b(tl;?dr|recap)\b", 2.0),
            *_kw("summarize", "summarise", "sum up", weight=1.5),
        ),
    ),
    DefaultIntent(
        slug="conversation-query",
        name="Question about the conversation",
        description="Questions about the conversation itself, answered from its history.",
        priority=10,
        patterns=(
            _re(
                r"\bwhat (did|have) (i|you|we) (ask|asked|say|said|discuss|discussed|"
                r"talk about|talked about)\b",
                4.0,
            ),
            _re(r"\b(my|your) (first|last|previous|earlier) (question|answer|message)\b", 4.0),
            _re(r"\b(earlier|before) in (this|our) (conversation|chat|session)\b", 3.0),
        ),
    ),
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
        _re(r"\bwhat are the (main|primary|key|major|common|recurring) \w+", 2.0),
        _re(r"\b(summary|summari[sz]e|overview|big picture|high[- ]level)\b", 1.5),
        _re(r"\ball (the )?(types|kinds|categories|themes|topics)\b", 1.5),
        _re(r"\bhow many (in )?(total|overall)\b|\b(total|overall) (number|count)\b", 1.5),
        _re(r"\b(general|overall) understanding\b", 1.5),
        _re(r"\b(themes?|trends?|patterns?) (across|in|throughout)\b", 1.5),
        _re(r"\bacross (all|the whole|the entire|every)\b", 1.0),
    ),
    "local": (
        _re(r"\bwhat (is|was|are) (the |a |an )?[a-z0-9_]", 1.0),
        _re(r"\bwho (is|was)\b", 1.5),
        _re(r"\bwhere (is|does|did|was)\b", 1.5),
        _re(r"\bwhen (did|was|is|does)\b", 1.5),
        _re(r"\b(specific|particular|exact|exactly)\b", 1.5),
        _re(
            r"\b(this|that) (function|class|method|entity|file|document|person|company|"
            r"endpoint|table|module)\b",
            1.5,
        ),
        _re(r"\bdefin(e|ition of)\b", 1.0),
    ),
}

"""Compiled intent and scope rules, shared by classification and flow keyword derivation.

Rules are compiled once per process and recompiled when any process changes
a pattern or intent: saving sets a new version in the shared cache, and
each process looks at that number at most once per RECHECK_SECONDS.
"""

from __future__ import annotations

import re
import threading
import time
from dataclasses import dataclass, field

from flywheel.cache import shared_cache
from routing.patterns import Matcher, PatternSet, compile_pattern, pattern_source

VERSION_KEY = "flywheel:intent-rules-version"
RECHECK_SECONDS = 1.0


@dataclass(frozen=True)
class CompiledRule:
    label: str  # the intent slug, or the scope (global/local)
    pattern: str
    is_regex: bool
    weight: float
    matcher: Matcher
    number: int = 0  # its place among its intent's rules on the admin page (1 on), if known
    pk: int = 0  # its IntentPattern's (ScopePattern's) id; 0: not read from the database


@dataclass(frozen=True)
class IntentRuleSet:
    """Every enabled rule of every enabled intent, grouped by intent slug, and the
    enabled scope (GLOBAL/LOCAL) rules, grouped by scope."""

    version: int
    rules: dict[str, tuple[CompiledRule, ...]]
    priorities: dict[str, int]
    scopes: dict[str, tuple[CompiledRule, ...]]
    # Every intent rule, in order, and the same rules as one set searched in one pass.
    _flat: tuple[CompiledRule, ...] = field(init=False, repr=False, compare=False)
    _set: PatternSet = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        flat = tuple(rule for rules in self.rules.values() for rule in rules)
        sources = [pattern_source(rule.pattern, is_regex=rule.is_regex) for rule in flat]
        object.__setattr__(self, "_flat", flat)  # frozen: set once, here
        object.__setattr__(self, "_set", PatternSet(sources))

    def matches(self, text: str) -> dict[str, list[CompiledRule]]:
        """The rules that match ``text``, by intent (intents without a match omitted),
        in the order of ``rules``."""
        found: dict[str, list[CompiledRule]] = {}
        for index in self._set.search(text):
            rule = self._flat[index]
            found.setdefault(rule.label, []).append(rule)
        return found


def _compiled(
    label: str, pattern: str, is_regex: bool, weight: float, number: int = 0, pk: int = 0
) -> CompiledRule:
    matcher = compile_pattern(pattern, is_regex=is_regex)
    return CompiledRule(label, pattern, is_regex, weight, matcher, number, pk)


RuleSpec = tuple[str, bool, float]  # pattern, is_regex, weight


def build_rules(
    version: int,
    intents: dict[str, tuple[int, list[RuleSpec]]],
    scopes: dict[str, list[RuleSpec]],
) -> IntentRuleSet:
    """Compile plain rule specs: ``intents`` maps slug -> (priority, rules)."""
    return IntentRuleSet(
        version,
        {
            slug: tuple(_compiled(slug, *spec, n) for n, spec in enumerate(specs, 1))
            for slug, (_, specs) in intents.items()
        },
        {slug: priority for slug, (priority, _) in intents.items()},
        {
            scope: tuple(_compiled(scope, *spec) for spec in specs)
            for scope, specs in scopes.items()
        },
    )


def default_rules() -> IntentRuleSet:
    """The shipped defaults, compiled without a database (benchmarks, evaluation)."""
    from routing.classification.shipped import DEFAULT_INTENTS, DEFAULT_SCOPE_PATTERNS

    return build_rules(
        0,
        {
            d.slug: (d.priority, [(p.pattern, p.is_regex, p.weight) for p in d.patterns])
            for d in DEFAULT_INTENTS
        },
        {
            scope: [(p.pattern, p.is_regex, p.weight) for p in patterns]
            for scope, patterns in DEFAULT_SCOPE_PATTERNS.items()
        },
    )


def _compile(version: int) -> IntentRuleSet:
    from routing.models import Intent, PatternKind, QueryScope, ScopePattern

    rules: dict[str, tuple[CompiledRule, ...]] = {}
    priorities: dict[str, int] = {}
    for intent in Intent.objects.filter(enabled=True).prefetch_related("patterns"):
        priorities[intent.slug] = intent.priority
        # Numbered as the intent's admin page lists its rules, disabled ones included.
        rules[intent.slug] = tuple(
            _compiled(intent.slug, p.pattern, p.kind == PatternKind.REGEX, p.weight, n, p.pk)
            for n, p in enumerate(intent.patterns.all(), 1)
            if p.enabled
        )
    scopes: dict[str, tuple[CompiledRule, ...]] = dict.fromkeys(QueryScope.values, ())
    for p in ScopePattern.objects.filter(enabled=True).order_by("scope", "id"):
        regex = p.kind == PatternKind.REGEX
        scopes[p.scope] += (_compiled(p.scope, p.pattern, regex, p.weight, pk=p.pk),)
    return IntentRuleSet(version, rules, priorities, scopes)


class _RuleCache:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._rules: IntentRuleSet | None = None
        self._checked_at = 0.0

    def get(self) -> IntentRuleSet:
        now = time.monotonic()
        rules = self._rules
        if rules is not None and now - self._checked_at < RECHECK_SECONDS:
            return rules
        version = _version()
        with self._lock:
            if self._rules is None or self._rules.version != version:
                self._rules = _compile(version)
            self._checked_at = now
            return self._rules

    def clear(self) -> None:
        with self._lock:
            self._rules = None


_cache = _RuleCache()


def _version() -> int:
    """The rules' version. None is set yet (a fresh cache, or one that was down and
    cleared what it missed): the first process to look sets a new one, so every
    process recompiles, edits made meanwhile included (0 while the cache is down)."""
    cache = shared_cache()
    version = cache.get(VERSION_KEY)
    if version is None:
        cache.add(VERSION_KEY, time.time_ns(), timeout=None)
        version = cache.get(VERSION_KEY)
    return int(version or 0)


def intent_rules() -> IntentRuleSet:
    """The current compiled rules (sync: call from a thread in async code)."""
    return _cache.get()


def intent_rules_changed() -> None:
    """Tell every process that rules changed (called on pattern and intent saves)."""
    # A new value rather than an increment: a write the cache missed (it was down)
    # is cleared once it answers, and "no version" differs from every one set here.
    shared_cache().set(VERSION_KEY, time.time_ns(), timeout=None)
    _cache.clear()


def flow_keywords(*, name: str, description: str = "", endpoint_name: str = "") -> list[str]:
    """Intent keywords for a flow, derived from its name, description and endpoint name.

    An intent is listed when one of its rules matches the flow's text or the
    flow names the intent (``code-review`` in ``code_review_bot``); the keyword
    rules that matched are listed after the intent slugs, as the flow's
    specificity (the match score grows with the number of keywords).
    """
    text = re.sub(r"[-_./]+", " ", f"{name} {description} {endpoint_name}")
    rules = intent_rules()
    slugs: list[str] = []
    keywords: list[str] = []
    for intent, hits in rules.matches(text).items():
        slugs.append(intent)
        keywords.extend(rule.pattern.lower() for rule in hits if not rule.is_regex)
    for intent in rules.rules:
        named = re.search(rf"\b{re.escape(intent.replace('-', ' '))}\b", text, re.IGNORECASE)
        if named and intent not in slugs:
            slugs.append(intent)
    return sorted(set(slugs)) + sorted(set(keywords) - set(slugs))

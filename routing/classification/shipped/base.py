"""The shapes of the shipped rules, written as keywords or as RE2 patterns."""

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


def keywords(*keywords: str, weight: float = 1.0) -> tuple[DefaultPattern, ...]:
    return tuple(DefaultPattern(k, weight) for k in keywords)


def regex(pattern: str, weight: float = 1.0) -> DefaultPattern:
    return DefaultPattern(pattern, weight, is_regex=True)

"""Safe, compiled text patterns for intent and scope rules.

Patterns are matched with RE2 (google-re2), which runs in time linear in the
input whatever the pattern, so no question can stall a worker. On save a
pattern must also pass a structural check that refuses nested repetition such
as ``(a+)+$``: harmless under RE2 but catastrophic in every backtracking
engine, so refusing it keeps the rules portable (exports, LLM prompts, other
tools) and tells the author early that the pattern is ambiguous.
"""

from __future__ import annotations

import importlib
import re
from typing import Any, Protocol

import re2
from django.core.exceptions import ValidationError

# The standard library's own regex parser, used only to inspect a pattern's
# structure; it is private, hence imported by name (and typed loosely).
sre_parser: Any = importlib.import_module("re._parser")
sre_constants: Any = importlib.import_module("re._constants")

MAX_PATTERN_LENGTH = 2000
# A repeat whose upper bound exceeds this counts as unbounded for nesting.
_LARGE_REPEAT = 10
_REPEATS = {sre_constants.MAX_REPEAT, sre_constants.MIN_REPEAT, sre_constants.POSSESSIVE_REPEAT}


class Matcher(Protocol):
    def search(self, text: str) -> Any: ...


def _options() -> Any:
    options = re2.Options()
    options.case_sensitive = False
    options.log_errors = False  # errors are reported to the author, not to stderr
    return options


def keyword_regex(keyword: str) -> str:
    """The regex for a keyword rule: the words, case-insensitive, on word boundaries."""
    words = keyword.split()
    body = r"\s+".join(re.escape(word) for word in words)
    # \b only beside a word character: "c++" must still match before a space.
    start = r"\b" if re.match(r"\w", words[0]) else ""
    end = r"\b" if re.search(r"\w$", words[-1]) else ""
    return start + body + end


def _nested_repeat(items: Any, inside_large_repeat: bool) -> str | None:
    """Return a description of the first nested repetition found, if any."""
    for op, arg in items:
        if op in _REPEATS:
            _low, high, sub = arg
            if inside_large_repeat and high > 1:
                return "a repeated group contains another repetition"
            large = high == sre_constants.MAXREPEAT or high > _LARGE_REPEAT
            found = _nested_repeat(sub, inside_large_repeat or large)
        elif op == sre_constants.SUBPATTERN:
            found = _nested_repeat(arg[-1], inside_large_repeat)
        elif op == sre_constants.BRANCH:
            found = next(
                (f for branch in arg[1] if (f := _nested_repeat(branch, inside_large_repeat))),
                None,
            )
        elif op in {sre_constants.ASSERT, sre_constants.ASSERT_NOT}:
            found = _nested_repeat(arg[1], inside_large_repeat)
        else:
            found = None
        if found:
            return found
    return None


def validate_regex(pattern: str) -> None:
    """Refuse a pattern that is empty, too long, invalid, or nests repetition.

    Raises django.core.exceptions.ValidationError with a message for the author.
    """
    if not pattern.strip():
        raise ValidationError("The pattern is empty.")
    if len(pattern) > MAX_PATTERN_LENGTH:
        raise ValidationError(f"The pattern is longer than {MAX_PATTERN_LENGTH} characters.")
    try:
        re2.compile(pattern, _options())
    except re2.error as err:
        reason = err.args[0].decode() if err.args and isinstance(err.args[0], bytes) else err
        raise ValidationError(f"Not a valid regular expression: {reason}.") from err
    try:
        parsed = sre_parser.parse(pattern)
    except re.error as err:
        raise ValidationError(f"Not a valid regular expression: {err}.") from err
    problem = _nested_repeat(parsed, inside_large_repeat=False)
    if problem:
        raise ValidationError(
            f"The pattern could backtrack catastrophically: {problem} "
            "(as in '(a+)+'). Rewrite it without nesting one repetition inside another."
        )


def validate_keyword(keyword: str) -> None:
    if not keyword.strip():
        raise ValidationError("The keyword is empty.")
    if len(keyword) > MAX_PATTERN_LENGTH:
        raise ValidationError(f"The keyword is longer than {MAX_PATTERN_LENGTH} characters.")


def pattern_source(pattern: str, *, is_regex: bool) -> str:
    """The regex a rule stands for (a keyword becomes a word-bounded regex)."""
    return pattern if is_regex else keyword_regex(pattern)


def compile_pattern(pattern: str, *, is_regex: bool) -> Matcher:
    """Compile a validated rule into a case-insensitive, linear-time matcher."""
    return re2.compile(pattern_source(pattern, is_regex=is_regex), _options())


class PatternSet:
    """Many regexes searched in a single pass over the text (RE2::Set).

    Asking each of a hundred compiled patterns in turn costs a call per
    pattern; the set walks the text once and says which of them match,
    about forty times faster on the shipped rules.
    """

    # The set's automaton is built lazily, state by state, within this budget;
    # RE2's default (8 MiB) is sized for one pattern, not hundreds.
    MAX_MEMORY = 64 << 20

    def __init__(self, sources: list[str]) -> None:
        self._size = len(sources)
        self._set: Any = None
        if sources:
            options = _options()
            options.max_mem = self.MAX_MEMORY
            self._set = re2.Set.SearchSet(options)
            for source in sources:
                self._set.Add(source)
            self._set.Compile()

    def __len__(self) -> int:
        return self._size

    def search(self, text: str) -> list[int]:
        """The indexes (in the order given) of the patterns found in ``text``."""
        if self._set is None:
            return []
        return sorted(self._set.Match(text) or ())

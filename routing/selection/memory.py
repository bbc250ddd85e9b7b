"""The sums an estimate keeps over past attempts, and how a short memory of the last
few attempts tells that a flow changed (routing.selection.estimates)."""

from __future__ import annotations

import math
from dataclasses import dataclass

MIN_LOG_SPREAD = 0.1  # the least spread of log latency an estimate assumes
RECENT_HALF_LIFE = 4.0  # attempts: the short memory a change is detected with
CHANGE = 5.0  # the log-likelihood ratio past which the short memory says the flow changed


@dataclass(frozen=True)
class Sums:
    """Weighted sums over attempts."""

    answered: float = 0.0  # weight of the attempts that answered
    failed: float = 0.0
    log_seconds: float = 0.0  # weighted sum of ln(latency in seconds) over answers
    log_squares: float = 0.0
    failed_seconds: float = 0.0  # weighted sum of the seconds failures took
    tokens: float = 0.0  # weighted sum of total tokens over the answers that reported them
    token_weight: float = 0.0

    @property
    def weight(self) -> float:
        return self.answered + self.failed

    def times(self, f: float) -> Sums:
        return Sums(
            self.answered * f,
            self.failed * f,
            self.log_seconds * f,
            self.log_squares * f,
            self.failed_seconds * f,
            self.tokens * f,
            self.token_weight * f,
        )

    def plus(self, other: Sums) -> Sums:
        return Sums(
            self.answered + other.answered,
            self.failed + other.failed,
            self.log_seconds + other.log_seconds,
            self.log_squares + other.log_squares,
            self.failed_seconds + other.failed_seconds,
            self.tokens + other.tokens,
            self.token_weight + other.token_weight,
        )

    def blend(self, f: float, other: Sums, g: float) -> Sums:
        """These sums times ``f`` plus ``other``'s times ``g``."""
        return Sums(
            self.answered * f + other.answered * g,
            self.failed * f + other.failed * g,
            self.log_seconds * f + other.log_seconds * g,
            self.log_squares * f + other.log_squares * g,
            self.failed_seconds * f + other.failed_seconds * g,
            self.tokens * f + other.tokens * g,
            self.token_weight * f + other.token_weight * g,
        )

    def minus(self, other: Sums) -> Sums:
        """What is left of these sums without ``other``'s part (counts never below zero;
        a sum of logarithms may be)."""
        left = {name: getattr(self, name) - getattr(other, name) for name in _SUMS}
        return Sums(**{k: v if k == "log_seconds" else max(v, 0.0) for k, v in left.items()})


_SUMS = tuple(Sums.__dataclass_fields__)


def _surprise(k: float, n: float, q: float) -> float:
    """The log-likelihood ratio of ``k`` events in ``n`` trials at their own rate against
    the rate ``q``."""
    q = min(max(q, 1e-3), 1 - 1e-3)
    ratio = 0.0
    if k > 0:
        ratio += k * math.log(k / (n * q))
    if n - k > 0:
        ratio += (n - k) * math.log((n - k) / (n * (1 - q)))
    return ratio


def changed(long: Sums, recent: Sums) -> bool:
    """Whether the last attempts (``recent``) are unlikely under what was known before
    them: failures far more or less often, or answers far slower or faster."""
    n = recent.weight
    if n < 2 or long.weight - n < 3 * RECENT_HALF_LIFE:
        return False
    # What was known before them: the long memory without the short one's part.
    failed = max(long.failed - recent.failed, 0.0)
    answered = max(long.answered - recent.answered, 0.0)
    failing = (failed + 0.5) / (failed + answered + 1)
    if _surprise(recent.failed, n, failing) > CHANGE:
        return True
    if recent.answered < 2 or answered < 3:
        return False
    mean = (long.log_seconds - recent.log_seconds) / answered
    squares = max(long.log_squares - recent.log_squares, 0.0) / answered
    spread = max(math.sqrt(max(squares - mean * mean, 0.0)), MIN_LOG_SPREAD)
    z = (recent.log_seconds / recent.answered - mean) / (spread / math.sqrt(recent.answered))
    return z * z / 2 > CHANGE

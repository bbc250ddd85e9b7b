"""What routing believes of one backend's flow for one intent, and how sure it is.

Evidence is a handful of sums over past attempts, each weighted by its age and
by how many newer attempts there are: an attempt ``half_life`` seconds old
counts half, and so does one followed by ``half_life_attempts`` newer ones of
the same flow and intent. So a change in a busy backend shows within a few
answers, and what is known of a backend nobody tries fades with time, until
routing is unsure enough to try it again. Sums discount
and add without keeping the attempts, so the same Evidence is folded from
stored performance records (after a restart, in any process) and from this
process's newest attempts.

An Estimate is Evidence read against a prior (what the backend does for its
other intents and what the fleet does for this one, worth a few attempts):

- success: a Beta posterior, so two successes never beat two hundred;
- time to answer: the typical (geometric mean) latency of answers, robust to
  the odd timeout, with the uncertainty of that mean;
- time a failure costs, before the next backend is tried.

Its ``expected_seconds`` is the expected time to a successful answer when this
candidate is tried first and, whenever it fails, the search goes on at the
policy's ``failure_cost_seconds``: ``t_ok + (1 - p) / p * (t_fail + cost)``.
Trying candidates in increasing order of it minimises the time to the first
answer along the whole chain (the classic ordering of a sequential search).
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterable
from dataclasses import dataclass, field, replace

from routing.selection.memory import MIN_LOG_SPREAD, RECENT_HALF_LIFE, Sums, changed

LN2 = math.log(2)
MIN_SECONDS = 0.001  # a latency is never taken as less (log of zero)
MIN_SUCCESS = 0.01  # the success a failing candidate is ranked with (never divide by zero)
LOG_SPREAD = 0.5  # the spread of log latency assumed until answers show their own
# How far a flow never tried may be from its prior's typical latency (in log seconds):
# flows differ far more from one another than one flow's answers do.
PRIOR_LOG_SPREAD = 1.0


# What is left of a flow's evidence for one intent when its backend changed on another
# since (a new deploy, a new model): tried again, it is measured again.
STALE_KEEP = 0.1


@dataclass(frozen=True)
class Evidence:
    """What is known of one flow for one intent: its attempts' sums, discounted to time
    ``at`` (seconds since the epoch), in a long memory and a short one (the last few
    attempts). When the short memory contradicts the long one (``changed``), the flow has
    changed: the long memory starts again from the attempt that showed it."""

    at: float = 0.0
    long: Sums = field(default_factory=Sums)
    recent: Sums = field(default_factory=Sums)
    newest: float = 0.0  # the newest attempt's time (0: none)
    changes: int = 0  # how many times a change was detected
    changed_at: float = 0.0  # when the last one was (0: never)
    # How many of its newest attempts failed in a row (0: the newest answered). Evidence
    # published before this was kept loads with the class default, 0.
    streak: int = 0

    # The long memory's sums, as the estimates read them.
    @property
    def answered(self) -> float:
        return self.long.answered

    @property
    def failed(self) -> float:
        return self.long.failed

    @property
    def log_seconds(self) -> float:
        return self.long.log_seconds

    @property
    def log_squares(self) -> float:
        return self.long.log_squares

    @property
    def failed_seconds(self) -> float:
        return self.long.failed_seconds

    @property
    def tokens(self) -> float:
        return self.long.tokens

    @property
    def token_weight(self) -> float:
        return self.long.token_weight

    @property
    def weight(self) -> float:
        return self.long.weight

    def discounted(self, now: float, half_life: float) -> Evidence:
        """The same evidence seen at ``now``: every sum times 2^-(age / half_life)."""
        if now <= self.at or not self.weight:
            return replace(self, at=max(now, self.at))
        f = math.exp(-LN2 * (now - self.at) / half_life)
        return replace(self, at=now, long=self.long.times(f), recent=self.recent.times(f))

    def then(
        self,
        newer: Evidence,
        half_life: float,
        attempts_half_life: float,
        moved_at: float = 0.0,
    ) -> Evidence:
        """This evidence followed by ``newer`` (one attempt, or several folded): this one
        discounted for the time between and for the newer attempts, in each memory.
        ``moved_at``: when the backend last changed on another intent; what this holds
        from before it is worth STALE_KEEP once the newer attempts come after it."""
        before = self
        if self.weight and self.newest < moved_at <= newer.newest:
            before = self.stale(STALE_KEEP)
        at = max(before.at, newer.at)
        mine = _age(before.at, at, half_life) if before.weight else 1.0
        theirs = _age(newer.at, at, half_life)
        n = max(newer.weight * theirs, 0.0)
        long = before.long.blend(mine * 0.5 ** (n / attempts_half_life), newer.long, theirs)
        recent = before.recent.blend(mine * 0.5 ** (n / RECENT_HALF_LIFE), newer.recent, theirs)
        newest = max(before.newest, newer.newest)
        changes = before.changes + newer.changes
        # The newer attempts extend this one's streak when none of them answered.
        streak = newer.streak + (before.streak if not newer.recent.answered else 0)
        if changed(long, recent):  # what came before says little of the flow now
            return Evidence(at, newer.long.times(theirs), recent, newest, changes + 1, at, streak)
        changed_at = max(before.changed_at, newer.changed_at)
        return Evidence(at, long, recent, newest, changes, changed_at, streak)

    def stale(self, keep: float) -> Evidence:
        """The same evidence worth ``keep`` of itself: its backend has changed since."""
        return replace(self, long=self.long.times(keep), recent=self.recent.times(keep))


def _age(then: float, now: float, half_life: float) -> float:
    """What evidence from ``then`` is worth at ``now``."""
    return math.exp(-LN2 * (now - then) / half_life) if now > then else 1.0


def observation(at: float, ok: bool, seconds: float, tokens: int | None = None) -> Evidence:
    """One attempt, finished at ``at``, as evidence."""
    seconds = max(seconds, MIN_SECONDS)
    if not ok:
        sums = Sums(failed=1.0, failed_seconds=seconds)
    else:
        log = math.log(seconds)
        sums = Sums(
            answered=1.0,
            log_seconds=log,
            log_squares=log * log,
            tokens=float(tokens or 0),
            token_weight=1.0 if tokens is not None else 0.0,
        )
    return Evidence(at=at, long=sums, recent=sums, newest=at, streak=0 if ok else 1)


Attempted = tuple[float, bool, float, int | None]  # (finished at, ok, seconds, tokens)


def folded(
    attempts: Iterable[Attempted],
    now: float,
    half_life: float,
    attempts_half_life: float,
    moved_at: float = 0.0,
) -> Evidence:
    """Evidence of ``(finished at, ok, seconds, tokens)`` attempts, oldest first, seen at
    ``now`` (``moved_at``: as Evidence.then)."""
    total = Evidence()
    for at, ok, seconds, tokens in attempts:
        seen = observation(at, ok, seconds, tokens)
        total = total.then(seen, half_life, attempts_half_life, moved_at)
    return total.discounted(now, half_life)


@dataclass(frozen=True)
class Prior:
    """What is believed before this candidate's own evidence, worth ``strength`` attempts."""

    success: float = 0.8
    log_seconds: float = 0.0  # ln of the typical latency (1 s)
    strength: float = 2.0


def prior_from(pools: Iterable[tuple[Sums, float]], default: Prior) -> Prior:
    """A prior drawn from related evidence (the backend's other intents, the fleet's
    answers to this intent), each counting for at most ``cap`` attempts, on top of
    ``default`` at its own strength."""
    weight = default.strength
    success = default.success * weight
    log_weight = default.strength
    log_seconds = default.log_seconds * log_weight
    for evidence, cap in pools:
        if evidence.weight <= 0:
            continue
        w = min(evidence.weight, cap)
        success += w * evidence.answered / evidence.weight
        weight += w
        if evidence.answered > 0:
            lw = min(evidence.answered, cap)
            log_seconds += lw * evidence.log_seconds / evidence.answered
            log_weight += lw
    return Prior(success / weight, log_seconds / log_weight, default.strength)


@dataclass(frozen=True)
class Estimate:
    alpha: float  # Beta posterior over the chance of success
    beta: float
    log_mean: float  # posterior mean of the typical ln(seconds to answer)
    log_mean_sd: float  # its standard deviation
    log_spread: float  # spread of ln(seconds) of single answers
    failed_seconds: float  # typical seconds a failure costs
    attempts: float  # the candidate's own (age-weighted) attempts
    tokens: float | None = None  # mean total tokens per answer (None: none reported)
    slow_in_flight: int = 0  # attempts still running past the typical latency
    retry_due: bool = False  # it only failed, long enough ago to be tried once more

    @property
    def success(self) -> float:
        return self.alpha / (self.alpha + self.beta)

    @property
    def success_margin(self) -> float:
        """Two standard deviations of the posterior over success."""
        n = self.alpha + self.beta
        return 2 * math.sqrt(self.alpha * self.beta / (n * n * (n + 1)))

    @property
    def typical_seconds(self) -> float:
        return math.exp(self.log_mean)

    @property
    def usual_seconds(self) -> float:
        """The time within which 9 answers in 10 come (the 90th percentile of single
        answers): past it, an attempt is slow for this flow (hedging starts another)."""
        return math.exp(self.log_mean + USUAL_Z * self.log_spread)

    def expected_seconds(self, failure_cost: float) -> float:
        return expected(self.success, self.typical_seconds, self.failed_seconds, failure_cost)

    def sampled_seconds(
        self, failure_cost: float, rng: random.Random, exploration: float = 1.0
    ) -> float:
        """expected_seconds for one draw from the posterior (Thompson sampling), its
        spread times ``exploration`` (1: the posterior itself)."""
        sharp = 1 / exploration**2
        p = rng.betavariate(self.alpha * sharp, self.beta * sharp)
        log = rng.gauss(self.log_mean, self.log_mean_sd * exploration)
        return expected(p, math.exp(log), self.failed_seconds, failure_cost)


def expected(success: float, seconds: float, failed_seconds: float, failure_cost: float) -> float:
    p = max(success, MIN_SUCCESS)
    return seconds + (1 - p) / p * (failed_seconds + failure_cost)


USUAL_Z = 1.2816  # the standard normal's 90th percentile
OVERDUE_SPREADS = 2.0  # an attempt in flight this many spreads past typical is overdue


def _spread(sums: Sums) -> float:
    if sums.answered < 2:
        return LOG_SPREAD
    mean = sums.log_seconds / sums.answered
    return max(math.sqrt(max(sums.log_squares / sums.answered - mean * mean, 0.0)), MIN_LOG_SPREAD)


def _overdue(sums: Sums, prior: Prior, in_flight: Iterable[float]) -> Sums:
    """The attempts still running far past the typical latency, as answers that took at
    least as long as they have run so far (censored: they may take longer yet)."""
    typical = (prior.log_seconds * prior.strength + sums.log_seconds) / (
        prior.strength + sums.answered
    )
    limit = math.exp(typical + OVERDUE_SPREADS * _spread(sums))
    overdue = Sums()
    for seconds in in_flight:
        if seconds > limit:
            log = math.log(seconds)
            overdue = overdue.plus(Sums(answered=1.0, log_seconds=log, log_squares=log * log))
    return overdue


def estimate(evidence: Evidence | None, prior: Prior, in_flight: Iterable[float] = ()) -> Estimate:
    """The posterior of ``evidence`` (seen at the time it is discounted to) under
    ``prior``. ``in_flight``: how long each attempt still running has run; those far
    past the typical latency count as answers that took at least that long (censored),
    and when they say the flow changed, they are all that counts:
    so a backend that starts to hang loses first place before its timeouts end."""
    e = evidence or Evidence()
    sums = e.long
    overdue = _overdue(sums, prior, in_flight)
    if overdue.weight:
        recent = e.recent.plus(overdue)
        sums = overdue if changed(sums.plus(overdue), recent) else sums.plus(overdue)
    k = prior.strength
    spread = _spread(sums)
    # The typical latency: a normal posterior over its logarithm, the prior's spread
    # being how far flows differ, the answers' own being how far one flow's answers do.
    precision = 1 / PRIOR_LOG_SPREAD**2 + sums.answered / spread**2
    log_mean = (prior.log_seconds / PRIOR_LOG_SPREAD**2 + sums.log_seconds / spread**2) / precision
    return Estimate(
        alpha=prior.success * k + sums.answered - overdue.answered,  # not answered yet
        beta=(1 - prior.success) * k + sums.failed,
        log_mean=log_mean,
        log_mean_sd=1 / math.sqrt(precision),
        log_spread=spread,
        failed_seconds=sums.failed_seconds / sums.failed if sums.failed > 0 else math.exp(log_mean),
        attempts=e.weight,
        tokens=sums.tokens / sums.token_weight if sums.token_weight > 0 else None,
        slow_in_flight=round(overdue.answered),
    )

"""Numbers as the pages show them: shares in whole percents that add up, and the
ticks of a chart's axes (round values, times a reader can place)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

# Tick spacings on a time axis, shortest first: the first that leaves at most
# MAX_TIME_TICKS ticks wins, so a day reads in hours and a month in dates.
TIME_STEPS = (
    timedelta(minutes=5),
    timedelta(minutes=10),
    timedelta(minutes=15),
    timedelta(minutes=30),
    timedelta(hours=1),
    timedelta(hours=2),
    timedelta(hours=3),
    timedelta(hours=6),
    timedelta(hours=12),
    timedelta(days=1),
    timedelta(days=2),
    timedelta(days=7),
    timedelta(days=14),
)
MAX_TIME_TICKS = 8
NICE = (1, 2, 2.5, 3, 4, 5, 6, 8)  # times a power of ten: the tick spacings of a value axis
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def whole_percents(counts: Sequence[float]) -> list[int]:
    """Each count's share of their sum in whole percents, adding up to exactly 100:
    each is rounded down, then the points left go to the largest remainders (ties to
    the first). All zeros for a sum of zero."""
    total = sum(counts)
    if total <= 0:
        return [0] * len(counts)
    exact = [100 * count / total for count in counts]
    shares = [int(share) for share in exact]
    by_remainder = sorted(range(len(counts)), key=lambda i: (shares[i] - exact[i], i))
    for i in by_remainder[: 100 - sum(shares)]:
        shares[i] += 1
    return shares


def value_ticks(peak: float) -> tuple[int, int, int]:
    """Three ticks for a count axis from 0 to at least ``peak``: 0, a round middle and
    twice it (``peak`` 7 gives 0, 4, 8; 120 gives 0, 60, 120; 0 gives 0, 1, 2)."""
    half = max(peak, 1) / 2
    power = 1
    while True:
        for nice in NICE:
            step = nice * power
            if step >= half and step == int(step):
                return 0, int(step), int(2 * step)
        power *= 10


def time_ticks(start: datetime, end: datetime) -> list[tuple[datetime, str]]:
    """Ticks on the time axis [start, end): (moment, label), at most MAX_TIME_TICKS,
    on round times in UTC. Hours and minutes read ``14:00``; a tick at midnight, and
    every tick once they are a day or more apart, read as a date (``Nov 27``)."""
    span = end - start
    step = next((s for s in TIME_STEPS if span / s <= MAX_TIME_TICKS), TIME_STEPS[-1])
    whole = (start - EPOCH) // step
    moment = EPOCH + whole * step
    if moment < start:
        moment += step
    ticks = []
    while moment < end:
        midnight = moment.hour == 0 and moment.minute == 0
        label = f"{moment:%b} {moment.day}" if midnight else f"{moment:%H:%M}"
        ticks.append((moment, label))
        moment += step
    return ticks


def bucket_starts(start: datetime, end: datetime, step: timedelta) -> list[datetime]:
    """Every bucket's start in [start, end): the x of a series where a bucket with no
    traffic counts as zero."""
    count = max(1, int((end - start) / step))
    return [start + i * step for i in range(count)]

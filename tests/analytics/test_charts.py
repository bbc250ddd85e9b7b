"""The analytics page's charts and numbers: drawn across the card, with axes a reader
can place, lines rather than dots, and shares that add up."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

from analytics import charts
from analytics.figures import time_ticks, value_ticks, whole_percents

START = datetime(2026, 11, 26, 12, 0, tzinfo=UTC)


def _day(hours_with_traffic: dict[int, int]) -> str:
    series = [
        {
            "backend": "fw",
            "buckets": [
                {"start": START + timedelta(hours=h), "requests": n}
                for h, n in sorted(hours_with_traffic.items())
            ],
        }
    ]
    return charts.traffic_chart(
        series, start=START, end=START + timedelta(hours=24), step=timedelta(hours=1)
    )


def _texts(svg: str, kind: str) -> list[str]:
    return re.findall(rf'<text class="tick {kind}"[^>]*>([^<]*)</text>', svg)


def test_the_traffic_chart_spans_its_card() -> None:
    svg = _day({3: 5})

    assert re.match(r'<svg class="chart traffic"[^>]* width="100%"', svg)
    assert "width: 100%" in svg
    assert "viewBox" not in svg.split(">")[0]  # the outer SVG does not scale its text


def test_a_day_of_traffic_is_a_line_over_every_hour_with_zeros_between() -> None:
    svg = _day({3: 5, 4: 2, 20: 7})

    (points,) = re.findall(r'<polyline class="series"[^>]*points="([^"]*)"', svg)
    pairs = points.split()
    assert len(pairs) == 24  # every hour of the day, not only the three with traffic
    assert "<circle" not in svg
    heights = [float(pair.split(",")[1]) for pair in pairs]
    assert heights.count(100.0) == 21  # the hours without traffic sit on the axis


def test_a_day_reads_in_hours_and_the_counts_on_round_ticks() -> None:
    svg = _day({3: 5, 20: 7})

    hours = _texts(svg, "x")
    assert 4 <= len(hours) <= 8
    assert "15:00" in hours
    assert "Nov 27" in hours  # midnight shows the date
    assert _texts(svg, "y") == ["0", "4", "8"]


def test_a_longer_window_reads_in_dates() -> None:
    ticks = time_ticks(START, START + timedelta(days=30))

    assert 4 <= len(ticks) <= 8
    assert all(re.fullmatch(r"[A-Z][a-z]{2} \d{1,2}", label) for _, label in ticks)


def test_the_value_ticks_are_round() -> None:
    assert value_ticks(0) == (0, 1, 2)
    assert value_ticks(7) == (0, 4, 8)
    assert value_ticks(120) == (0, 60, 120)
    assert value_ticks(1234) == (0, 800, 1600)


def test_shares_add_up_to_a_hundred_by_largest_remainder() -> None:
    assert whole_percents([1, 1, 1]) == [34, 33, 33]
    assert whole_percents([2, 1, 0]) == [67, 33, 0]
    assert whole_percents([0, 0]) == [0, 0]
    for counts in ([7, 11, 13], [1, 2, 3, 4, 5, 6], [999, 1, 1]):
        assert sum(whole_percents(counts)) == 100


def test_the_comparison_puts_each_intents_backends_side_by_side() -> None:
    stats = {"success_rate": 0.9, "p95_ms": 812.3, "requests": 12}
    intents = [
        {
            "intent": "code-review",
            "decisions": 1,
            "backends": [{"backend": "fw", **stats}, {"backend": "lf", **stats, "p95_ms": None}],
        },
        {"intent": "summarize", "decisions": 3, "backends": [{"backend": "lf", **stats}]},
    ]

    svg = charts.comparison_chart(intents, charts.colours(["fw", "lf"]))

    assert svg.count('class="bar"') == 9  # three metrics for each of three backend rows
    assert 'width="100%"' in svg
    coloured = set(
        re.findall(r'fill="(#[0-9a-f]{6})" data-intent="[^"]*" data-backend="(\w+)"', svg)
    )
    assert len(coloured) == 2  # one colour per backend, the same under every intent
    assert {backend for _, backend in coloured} == {"fw", "lf"}
    assert "1 decision<" in svg
    assert "3 decisions<" in svg
    assert "812 ms" in svg
    assert "—" in svg  # no p95 to show


def test_the_health_strip_spans_the_card() -> None:
    bucket = {"start": START, "ok": 1, "checks": 2, "state": "mixed"}

    svg = charts.health_chart(
        [{"backend": "fw", "buckets": [bucket]}],
        start=START,
        end=START + timedelta(hours=1),
        step=timedelta(minutes=1),
    )

    assert re.match(r'<svg class="chart health"[^>]* width="100%"', svg)
    assert 'x="0.00%"' in svg
    assert _texts(svg, "x")

"""Charts for the analytics page, drawn on the server as inline SVG.

No chart library and no script: the page draws offline, in any browser, and a
test can read the numbers back from the elements (each bar and bucket carries
a ``<title>`` and ``data-value``).

Each chart spans its card: the SVG is 100% wide with no viewBox, its horizontal
positions in percents, so its text keeps its size in pixels at any width. The
lines are drawn in a nested SVG stretched over the plot (``preserveAspectRatio
="none"``), their strokes kept thin by ``vector-effect``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta
from typing import Any

from django.utils.html import escape, format_html
from django.utils.safestring import SafeString, mark_safe

from analytics.figures import bucket_starts, time_ticks, value_ticks

PALETTE = ("#2563eb", "#d97706", "#059669", "#dc2626", "#7c3aed", "#0891b2", "#db2777", "#65a30d")
STATE_COLOURS = {"up": "#16a34a", "mixed": "#f59e0b", "down": "#dc2626"}
GRID = "#d8dce2"
HALO = 'stroke="#fff" stroke-width="3" paint-order="stroke"'  # text readable over a line
PLOT_WIDTH = 1000  # the nested plot's own units across; stretched to the card


def _svg(height: int, parts: Iterable[str], name: str) -> SafeString:
    """The chart's element around ``parts``: each already escaped (built by format_html,
    or from numbers and escaped names)."""
    return format_html(
        '<svg class="chart {}" role="img" width="100%" height="{}" '
        'style="width: 100%; height: {}px; overflow: visible">{}</svg>',
        name,
        height,
        height,
        mark_safe("".join(parts)),  # noqa: S308 - see the docstring
    )


def colours(names: Iterable[str]) -> dict[str, str]:
    """One colour per backend name, the same on every chart of a page."""
    return {name: PALETTE[i % len(PALETTE)] for i, name in enumerate(sorted(set(names)))}


def _pct(fraction: float) -> str:
    return f"{100 * fraction:.2f}%"


def _anchor(fraction: float) -> str:
    """A label near an edge grows inwards, so it is not cut off."""
    return "start" if fraction < 0.04 else "end" if fraction > 0.96 else "middle"


def _time_axis(start: datetime, end: datetime, y: int) -> list[str]:
    whole = (end - start).total_seconds() or 1.0
    parts: list[str] = []
    for moment, label in time_ticks(start, end):
        at = (moment - start).total_seconds() / whole
        parts.append(
            format_html(
                '<line class="tick" x1="{}" x2="{}" y1="{}" y2="{}" stroke="#9aa3af"/>'
                '<text class="tick x" x="{}" y="{}" text-anchor="{}">{}</text>',
                _pct(at),
                _pct(at),
                y,
                y + 5,
                _pct(at),
                y + 18,
                _anchor(at),
                label,
            )
        )
    return parts


def _series_points(
    buckets: Sequence[dict[str, Any]], starts: Sequence[datetime]
) -> list[tuple[float, int]]:
    """(x in the plot's units, requests) at the middle of each bucket of the window,
    zero where none; a lone bucket is a level line across."""
    counts = {b["start"]: b["requests"] for b in buckets}
    if len(starts) == 1:
        return [(0.0, counts.get(starts[0], 0)), (float(PLOT_WIDTH), counts.get(starts[0], 0))]
    return [(PLOT_WIDTH * (i + 0.5) / len(starts), counts.get(s, 0)) for i, s in enumerate(starts)]


def _value_axis(ticks: Sequence[int], top: int, tall: int) -> tuple[list[str], list[str]]:
    """The gridlines (drawn under the lines) and their labels (drawn over them)."""
    grid: list[str] = []
    labels: list[str] = []
    for value in ticks:
        y = top + tall * (1 - value / ticks[-1])
        grid.append(
            format_html(
                '<line class="grid" x1="0" x2="100%" y1="{}" y2="{}" stroke="{}"/>',
                f"{y:.1f}",
                f"{y:.1f}",
                GRID if value else "#9aa3af",
            )
        )
        labels.append(
            format_html(
                '<text class="tick y" x="2" y="{}" ' + HALO + ">{}</text>",
                f"{y - 4:.1f}",
                f"{value:,}",
            )
        )
    return grid, labels


def traffic_chart(
    series: Sequence[dict[str, Any]],
    *,
    start: datetime,
    end: datetime,
    step: timedelta,
    palette: dict[str, str] | None = None,
) -> SafeString:
    """Requests per bucket, one line per backend over every bucket of [start, end) (a
    bucket without traffic is 0), with time ticks below and 0 / middle / top ticks."""
    palette = palette or colours(s["backend"] for s in series)
    top, tall = 14, 200
    starts = bucket_starts(start, end, step)
    peak = max((b["requests"] for s in series for b in s["buckets"]), default=0)
    ticks = value_ticks(peak)
    parts, labels = _value_axis(ticks, top, tall)
    lines = []
    for each in series:
        points = _series_points(each["buckets"], starts)
        path = " ".join(f"{x:.1f},{100 * (1 - n / ticks[-1]):.2f}" for x, n in points)
        lines.append(
            format_html(
                '<polyline class="series" data-backend="{}" points="{}" fill="none" '
                'stroke="{}" stroke-width="2" vector-effect="non-scaling-stroke" '
                'stroke-linejoin="round"/>',
                each["backend"],
                path,
                palette.get(each["backend"], PALETTE[0]),
            )
        )
    parts.append(
        format_html(
            '<svg class="plot" x="0" y="{}" width="100%" height="{}" viewBox="0 0 {} 100" '
            'preserveAspectRatio="none" overflow="visible">{}</svg>',
            top,
            tall,
            PLOT_WIDTH,
            mark_safe("".join(lines)),  # noqa: S308 - built by format_html above
        )
    )
    parts.extend(labels)
    parts.append(_buckets(series, starts, step, top, tall))
    parts.extend(_time_axis(start, end, top + tall))
    return _svg(top + tall + 26, parts, "traffic")


def _buckets(
    series: Sequence[dict[str, Any]],
    starts: Sequence[datetime],
    step: timedelta,
    top: int,
    tall: int,
) -> str:
    """A column per bucket, transparent, whose title reads every backend's requests."""
    counts = [
        ({b["start"]: b["requests"] for b in s["buckets"]}, escape(s["backend"])) for s in series
    ]
    width = 1 / len(starts)
    columns = []
    for i, moment in enumerate(starts):
        values = [(name, found.get(moment, 0)) for found, name in counts]
        said = ", ".join(f"{name} {n:,}" for name, n in values)
        # Numbers and names escaped above: f-strings cost a tenth of format_html each.
        columns.append(
            f'<rect class="bucket" x="{_pct(i * width)}" y="{top}" width="{_pct(width)}" '
            f'height="{tall}" fill="transparent" data-value="{sum(n for _, n in values)}">'
            f"<title>{moment:%b %d %H:%M} UTC ({step.total_seconds() / 60:.0f} min): "
            f"{said}</title></rect>"
        )
    return "".join(columns)


def health_chart(
    timeline: Sequence[dict[str, Any]],
    *,
    start: datetime,
    end: datetime,
    step: timedelta,
) -> SafeString:
    """One strip per backend, named above it, the card's width: a cell per bucket
    (``step`` long) with probes, coloured up / mixed / down; time ticks below."""
    whole = (end - start).total_seconds() or 1.0
    cell = max(0.002, step.total_seconds() / whole)
    row = 36
    parts: list[str] = []

    def at(moment: datetime) -> str:
        return _pct((moment - start).total_seconds() / whole)

    for i, each in enumerate(timeline):
        y = i * row
        parts.append(
            format_html('<text class="label" x="0" y="{}">{}</text>', y + 13, each["backend"])
        )
        parts.extend(
            f'<rect class="health {b["state"]}" x="{at(b["start"])}" '
            f'y="{y + 18}" width="{_pct(cell)}" height="14" fill="{STATE_COLOURS[b["state"]]}">'
            f"<title>{b['start']:%b %d %H:%M}: {b['ok']} of {b['checks']} probes answered"
            "</title></rect>"
            for b in each["buckets"]  # numbers and a state of ours: nothing to escape
        )
    bottom = len(timeline) * row
    parts.extend(_time_axis(start, end, bottom))
    return _svg(bottom + 24, parts, "health")


# The comparison's columns: (title, left edge, width) as fractions of the card.
COLUMNS = (
    ("Backend", 0.0, 0.18),
    ("Success rate", 0.19, 0.26),
    ("p95 latency", 0.46, 0.26),
    ("Volume (attempts)", 0.73, 0.27),
)
BAR_SHARE = 0.7  # of a column: the longest bar; its value is written after it


def _metrics(b: dict[str, Any]) -> tuple[tuple[float | None, str], ...]:
    """A backend's (value, text) per metric column: success %, p95 ms, attempts."""
    rate, p95 = b["success_rate"], b["p95_ms"]
    return (
        (None if rate is None else 100 * rate, "—" if rate is None else f"{100 * rate:.0f}%"),
        (p95, "—" if p95 is None else f"{p95:,.0f} ms"),
        (b["requests"], f"{b['requests']:,}"),
    )


def comparison_chart(intents: Sequence[dict[str, Any]], palette: dict[str, str]) -> SafeString:
    """Backends side by side per intent: a row per backend under each intent, with a
    bar each for success rate (of 100%), p95 latency and volume (of the largest over
    every intent, so intents compare too), coloured by backend."""
    rows = [(i, b, _metrics(b)) for i in intents for b in i["backends"]]
    tops = [100.0] + [max((m[k][0] or 0 for _, _, m in rows), default=0) for k in (1, 2)]
    parts: list[str] = [
        format_html('<text class="heading" x="{}" y="12">{}</text>', _pct(left), title)
        for title, left, _ in COLUMNS
    ]
    y, shown = 22, None
    for intent, backend, metrics in rows:
        if intent is not shown:
            shown, y = intent, y + 28
            n = intent["decisions"]
            parts.append(
                format_html(
                    '<text class="intent" x="0" y="{}" font-weight="600">{}'
                    '<tspan class="muted" font-weight="400"> · {} decision{}</tspan></text>',
                    y - 8,
                    intent["intent"] or "(none)",
                    f"{n:,}",
                    "" if n == 1 else "s",
                )
            )
        parts.append(_comparison_row(intent["intent"], backend, metrics, tops, y, palette))
        y += 20
    return _svg(y + 4, parts, "comparison")


def _comparison_row(
    intent: str,
    backend: dict[str, Any],
    metrics: Sequence[tuple[float | None, str]],
    tops: Sequence[float],
    y: int,
    palette: dict[str, str],
) -> str:
    name, fill = backend["backend"], palette.get(backend["backend"], PALETTE[0])
    parts: list[str] = [format_html('<text class="label" x="0" y="{}">{}</text>', y + 12, name)]
    for (title, left, width), (value, text), top in zip(COLUMNS[1:], metrics, tops, strict=True):
        length = 0.0 if value is None or top <= 0 else max(0.004, BAR_SHARE * width * value / top)
        parts.append(
            format_html(
                '<rect class="bar" x="{}" y="{}" width="{}" height="14" rx="2" fill="{}" '
                'data-intent="{}" data-backend="{}" data-value="{}">'
                "<title>{} on {}: {} {}</title></rect>"
                '<text class="value" x="{}" y="{}">{}</text>',
                _pct(left),
                y + 1,
                _pct(length),
                fill,
                intent,
                name,
                "" if value is None else f"{value:g}",
                name,
                intent or "(none)",
                title,
                text,
                _pct(left + length + 0.006),
                y + 12,
                text,
            )
        )
    return "".join(parts)

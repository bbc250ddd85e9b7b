"""Charts for the analytics page, drawn on the server as inline SVG.

No chart library and no script: the page draws offline, in any browser, and a
test can read the numbers back from the elements (each bar and point carries
a ``<title>`` and ``data-value``).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from django.utils.html import escape, format_html
from django.utils.safestring import SafeString, mark_safe

PALETTE = ("#2563eb", "#d97706", "#059669", "#dc2626", "#7c3aed", "#0891b2", "#db2777", "#65a30d")
STATE_COLOURS = {"up": "#16a34a", "mixed": "#f59e0b", "down": "#dc2626"}
LABEL_WIDTH = 150
BAR_HEIGHT = 18


def _svg(width: int, height: int, parts: Sequence[str]) -> SafeString:
    """The chart's element around ``parts``: each already escaped (built by format_html,
    or from numbers and escaped names)."""
    return format_html(
        '<svg class="chart" role="img" width="{}" height="{}" viewBox="0 0 {} {}">{}</svg>',
        width,
        height,
        width,
        height,
        mark_safe("".join(parts)),  # noqa: S308 - see the docstring
    )


def colour(index: int) -> str:
    return PALETTE[index % len(PALETTE)]


def bar_chart(
    bars: Sequence[tuple[str, float | None, str]], *, maximum: float, width: int = 420
) -> SafeString:
    """Horizontal bars: (label, value, text shown beside it); a None value draws no bar."""
    span = width - LABEL_WIDTH - 70
    height = len(bars) * (BAR_HEIGHT + 6) + 4
    rows = []
    for i, (label, value, text) in enumerate(bars):
        y = 2 + i * (BAR_HEIGHT + 6)
        length = 0 if value is None or maximum <= 0 else max(1.0, span * value / maximum)
        rows.append(
            format_html(
                '<text x="0" y="{}" class="label">{}</text>'
                '<rect class="bar" x="{}" y="{}" width="{}" height="{}" fill="{}" '
                'data-value="{}"><title>{}: {}</title></rect>'
                '<text x="{}" y="{}" class="value">{}</text>',
                y + 13,
                label[:22],
                LABEL_WIDTH,
                y,
                f"{length:.1f}",
                BAR_HEIGHT,
                colour(i),
                "" if value is None else value,
                label,
                text,
                f"{LABEL_WIDTH + length + 4:.1f}",
                y + 13,
                text,
            )
        )
    return _svg(width, height, rows)


def _x(moment: datetime, start: datetime, end: datetime, left: int, span: int) -> float:
    whole = (end - start).total_seconds() or 1.0
    return left + span * (moment - start).total_seconds() / whole


def traffic_chart(
    series: Sequence[dict[str, Any]], *, start: datetime, end: datetime, width: int = 860
) -> SafeString:
    """Requests per bucket, one line (with a dot per bucket) per backend."""
    height, left, top, bottom = 220, 40, 10, 30
    span, tall = width - left - 10, height - top - bottom
    peak = max((p["requests"] for s in series for p in s["buckets"]), default=0) or 1
    lines = []
    for i, each in enumerate(series):
        points = [
            (_x(p["start"], start, end, left, span), top + tall * (1 - p["requests"] / peak), p)
            for p in each["buckets"]
        ]
        path = " ".join(f"{x:.1f},{y:.1f}" for x, y, _ in points)
        name = escape(each["backend"])
        # Hundreds of elements: f-strings over numbers (nothing to escape) and the one
        # escaped name cost a tenth of format_html per element.
        dots = "".join(
            f'<circle class="point" cx="{x:.1f}" cy="{y:.1f}" r="2.5" fill="{colour(i)}" '
            f'data-value="{p["requests"]}"><title>{name} at {p["start"]:%m-%d %H:%M}: '
            f"{p['requests']}</title></circle>"
            for x, y, p in points
        )
        lines.append(
            format_html(
                '<polyline class="series" points="{}" fill="none" stroke="{}" '
                'stroke-width="1.5"/>{}',
                path,
                colour(i),
                mark_safe(dots),  # noqa: S308 - numbers, and the name escaped above
            )
        )
    axis = format_html(
        '<line x1="{}" y1="{}" x2="{}" y2="{}" stroke="#9aa3af"/>'
        '<text x="{}" y="{}" class="label">{}</text>'
        '<text x="{}" y="{}" class="label" text-anchor="end">{}</text>'
        '<text x="0" y="{}" class="label">{}</text>',
        left, top + tall, left + span, top + tall,
        left, height - 8, f"{start:%m-%d %H:%M}",
        left + span, height - 8, f"{end:%m-%d %H:%M}",
        top + 10, peak,
    )  # fmt: skip
    return _svg(width, height, [axis, *lines])


def health_chart(
    timeline: Sequence[dict[str, Any]],
    *,
    start: datetime,
    end: datetime,
    step: timedelta,
    width: int = 860,
) -> SafeString:
    """One strip per backend: a cell per bucket (``step`` long) with probes, coloured
    up / mixed / down."""
    left, row = LABEL_WIDTH, 22
    span = width - left - 10
    cell = max(2.0, span * step.total_seconds() / ((end - start).total_seconds() or 1.0))
    cells: list[str] = []
    for i, each in enumerate(timeline):
        y = 4 + i * row
        cells.append(
            format_html('<text x="0" y="{}" class="label">{}</text>', y + 13, each["backend"][:22])
        )
        cells.extend(
            f'<rect class="health {b["state"]}" x="{_x(b["start"], start, end, left, span):.1f}" '
            f'y="{y}" width="{cell:.1f}" height="16" fill="{STATE_COLOURS[b["state"]]}">'
            f"<title>{b['start']:%m-%d %H:%M}: {b['ok']} of {b['checks']} probes answered"
            "</title></rect>"
            for b in each["buckets"]  # numbers and a state of ours: nothing to escape
        )
    height = 8 + len(timeline) * row
    return _svg(width, height, cells)

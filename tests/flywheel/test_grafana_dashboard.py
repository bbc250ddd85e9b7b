"""The Grafana dashboard shipped in docs/grafana asks only for series that a real
/metrics scrape holds, by labels those series carry, and leaves no metric out."""

from __future__ import annotations

import json
import re
from typing import Any, cast

import httpx
import pytest
from asgiref.sync import sync_to_async
from prometheus_client.parser import text_string_to_metric_families

from flywheel.asgi import application
from routing.recording.writer import drain
from tests.paths import ROOT
from tests.routing_world import World

pytestmark = pytest.mark.django_db(transaction=True)

DASHBOARD = ROOT / "docs" / "grafana" / "flywheel-dashboard.json"
# Words of PromQL that are neither series nor labels.
KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "and", "or", "unless",
            "bool", "offset", "inf", "nan"}  # fmt: skip
SUFFIXES = {
    "counter": ("_total", "_created"),
    "histogram": ("_bucket", "_sum", "_count", "_created"),
    "gauge": ("",),
}


def _exprs(panels: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """(panel title, expr) of every query, rows' panels included."""
    found = []
    for panel in panels:
        found += _exprs(panel.get("panels", []))
        found += [(panel["title"], t["expr"]) for t in panel.get("targets", [])]
    return found


def parsed(expr: str) -> tuple[set[str], set[str]]:
    """The series names and the label names a PromQL expression uses."""
    text = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)
    labels = set()
    for matchers in re.findall(r"\{([^}]*)\}", text):
        labels |= set(re.findall(r"([A-Za-z_]\w*)\s*(?:=~|!~|!=|=)", matchers))
    text = re.sub(r"\{[^}]*\}|\[[^\]]*\]", " ", text)
    grouping = r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)"
    for names in re.findall(grouping, text):
        labels |= {name.strip() for name in names.split(",") if name.strip()}
    text = re.sub(grouping, " ", text)
    words = re.findall(r"(?<![\w$.])([A-Za-z_:][\w:]*)\b(?!\s*\()", text)
    return {w for w in words if w.lower() not in KEYWORDS}, labels


def test_the_parser_finds_series_and_labels() -> None:
    series, labels = parsed(
        'histogram_quantile(0.95, sum by (backend_id, le) (rate(flywheel_x_bucket{result="ok",'
        ' owner=~"a|b"}[$__rate_interval]))) / on (backend_id) flywheel_y'
    )

    assert series == {"flywheel_x_bucket", "flywheel_y"}
    assert labels == {"backend_id", "le", "result", "owner"}


async def _get(path: str, **kwargs: Any) -> httpx.Response:
    transport = httpx.ASGITransport(app=cast(Any, application), client=("127.0.0.1", 40000))
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as http:
        return await http.request("GET" if not kwargs else "POST", path, **kwargs)


async def _scrape(world: World, raw_api_key: str) -> str:
    """/metrics after a question answered on a fallback: every family has samples."""
    world.fail(world.fw_route)
    asked = await _get(
        "/api/v1/query",
        json={"question": "Please review my pull request"},
        headers={"Authorization": f"Bearer {raw_api_key}"},
    )
    assert asked.status_code == 200, asked.content
    await sync_to_async(drain)()
    return (await _get("/metrics")).text


def _exported(text: str) -> dict[str, set[str]]:
    """Each series name the scrape exports (suffixes included), with its labels."""
    series: dict[str, set[str]] = {}
    for family in text_string_to_metric_families(text):
        labels = {name for sample in family.samples for name in sample.labels}
        for suffix in SUFFIXES.get(family.type, ("",)):
            series[family.name + suffix] = labels | ({"le"} if suffix == "_bucket" else set())
    return series


async def test_every_dashboard_query_uses_series_flywheel_exports(
    world: World, raw_api_key: str
) -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    scraped = await _scrape(world, raw_api_key)
    exported = _exported(scraped)
    queries = _exprs(dashboard["panels"])
    assert len(queries) >= 15

    used: set[str] = set()
    for title, expr in queries:
        series, labels = parsed(expr)
        assert series, (title, expr)
        unknown = series - set(exported)
        assert not unknown, f"{title!r} asks for {sorted(unknown)}, not in /metrics"
        carried = set().union(*(exported[name] for name in series))
        assert labels <= carried, f"{title!r} uses labels {sorted(labels - carried)}"
        used |= series
    # ... and each of Flywheel's metrics has a panel (a counter's creation time aside).
    ours = {
        family.name
        for family in text_string_to_metric_families(scraped)
        if family.name.startswith("flywheel_") and not family.name.endswith("_created")
    }
    left_out = {f for f in ours if not any(name.startswith(f) for name in used)}
    assert not left_out, f"no panel shows {sorted(left_out)}"

"""Reading a server's flow list a page at a time, within bounds: one loop for every kind.

Each adapter says how to ask for one page and read it (``FlowBackend._flows_page``);
this loop says when to stop. A server's own word (Flowise's ``total``, Langflow's
``pages``) ends the list, and so does a page that brings no record not seen before,
whatever the server promised: one that ignores the page asked for and answers the
same records again cannot loop discovery. Past FLYWHEEL_DISCOVERY_MAX_PAGES pages or
FLYWHEEL_DISCOVERY_MAX_FLOWS records no further page is asked for, and discovery
fails naming the backend and the limit (``failure: too_large``, as an answer too
large to read does: backends/http/limits.py).

Failing, rather than keeping the first N flows: discovery marks every flow missing
from its list removed (chatflows/services.py), so a cut list would take the rest
out of routing, a different rest each time the server's order changed. Failed, the
backend keeps the flows of its last whole discovery, and says why.

A record that does not fit (records.py) is skipped with a warning naming the
backend and the field, and counted: the other flows are still discovered. A flow
listed twice is taken once, as first listed.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from backends.adapters.records import DiscoveredFlow, RecordProblem, flow_problem
from backends.errors import BackendUnexpectedError
from backends.http.limits import (
    DISCOVERY_FLOW_SETTING,
    DISCOVERY_PAGE_SETTING,
    discovery_max_flows,
    discovery_max_pages,
)

if TYPE_CHECKING:
    from backends.adapters.base import FlowBackend

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class FlowsPage:
    """One page of a server's flow list, as its adapter read it.

    ``last``: the server says no page follows (or it does not paginate). ``total``:
    how many records the server says its whole list holds, when it says so by count
    rather than by ``last``. ``others``: the ids of records on the page that are not
    flows to route to (Langflow's saved components), so that a page of them alone
    still counts as new.
    """

    flows: Sequence[DiscoveredFlow]
    last: bool = False
    total: int | None = None
    others: Sequence[str] = ()


@dataclass(frozen=True)
class Discovery:
    """What discovery found: the flows Flywheel keeps, and the records it skipped."""

    flows: tuple[DiscoveredFlow, ...]
    skipped: tuple[RecordProblem, ...] = ()


async def discover(adapter: FlowBackend, fetch: Callable[[int], Awaitable[FlowsPage]]) -> Discovery:
    """Every flow on ``adapter``'s server, a page at a time (``fetch`` reads page n, from
    1), within the limits.

    Raises BackendUnexpectedError past a limit, and whatever ``fetch`` raises.
    """
    max_pages, max_flows = discovery_max_pages(), discovery_max_flows()
    found = _Found(adapter)
    number = 0
    while True:
        number += 1
        page = await fetch(number)
        new = found.take(page)
        listed = len(found.seen)
        if listed > max_flows:
            raise too_many_flows(adapter, max_flows)
        if not new or page.last or (page.total is not None and listed >= page.total):
            return Discovery(tuple(found.flows), tuple(found.skipped))
        # More is promised: past a limit, it is not asked for.
        if number >= max_pages:
            what = f"{max_pages} pages of flows"
            raise _too_many(adapter, what, DISCOVERY_PAGE_SETTING, {"limit_pages": max_pages})
        if listed >= max_flows:
            raise too_many_flows(adapter, max_flows)


class _Found:
    """What discovery has found so far: every id listed, the flows kept, those skipped."""

    def __init__(self, adapter: FlowBackend) -> None:
        self.adapter = adapter
        self.seen: set[str] = set()
        self.flows: list[DiscoveredFlow] = []
        self.skipped: list[RecordProblem] = []

    def take(self, page: FlowsPage) -> int:
        """Take the page's flows not listed before; returns how many of its records were new."""
        before = len(self.seen)
        self.seen.update(page.others)
        for flow in page.flows:
            if flow.external_id in self.seen:
                continue
            self.seen.add(flow.external_id)
            problem = flow_problem(flow)
            if problem is None:
                self.flows.append(flow)
            else:
                self.skipped.append(problem)
                self._warn(problem)
        return len(self.seen) - before

    def _warn(self, problem: RecordProblem) -> None:
        adapter = self.adapter
        error = problem.error(label=adapter.label, backend=adapter.config.name)
        logger.warning("%s Discovery skips it.", adapter.http.clean_error(error).message)


def too_many_flows(adapter: FlowBackend, limit: int) -> BackendUnexpectedError:
    """The error for a server that lists more than ``limit`` flows."""
    return _too_many(adapter, f"{limit} flows", DISCOVERY_FLOW_SETTING, {"limit_flows": limit})


def _too_many(
    adapter: FlowBackend, what: str, setting: str, limit: dict[str, int]
) -> BackendUnexpectedError:
    backend = adapter.config.name
    return BackendUnexpectedError(
        f"{adapter.label} backend {backend!r} lists more than {what}, the most Flywheel "
        f"reads ({setting}); discovery stopped, and its flows stay as last discovered.",
        backend=backend,
        details={"failure": "too_large", **limit, "setting": setting},
    )

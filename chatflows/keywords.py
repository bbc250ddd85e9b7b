"""A flow's intent keywords, derived by whoever owns the intent rules.

The rules live in routing, which builds on chatflows; so routing registers
its deriver in its AppConfig.ready() (``use_keyword_deriver``) and chatflows
only calls ``flow_keywords``. Until one is registered (a script that sets up
Django without routing) no keywords are derived: ``flow_keywords`` returns []
and such a flow serves no intent until the rules are there and discovery runs
again (or an admin edits its keywords).
"""

from __future__ import annotations

from typing import Protocol


class KeywordDeriver(Protocol):
    def __call__(self, *, name: str, description: str = "", endpoint_name: str = "") -> list[str]:
        """The intent keywords of a flow so named and described."""
        ...


def _no_keywords(*, name: str, description: str = "", endpoint_name: str = "") -> list[str]:
    return []


_deriver: KeywordDeriver = _no_keywords


def use_keyword_deriver(deriver: KeywordDeriver) -> None:
    """Derive keywords with ``deriver`` from now on (called once, at start-up)."""
    global _deriver
    _deriver = deriver


def flow_keywords(*, name: str, description: str = "", endpoint_name: str = "") -> list[str]:
    """The intent keywords of a flow from its name, description and endpoint name."""
    return _deriver(name=name, description=description, endpoint_name=endpoint_name)

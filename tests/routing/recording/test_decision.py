"""The decision record's own rules: what is kept of an answer."""

from __future__ import annotations

import pytest

from routing.recording.decision import clipped


@pytest.mark.parametrize("length", [0, 1, 99, 100])
def test_text_within_the_limit_is_kept_as_it_is(length: int) -> None:
    assert clipped("a" * length, 100) == "a" * length


@pytest.mark.parametrize(("length", "limit"), [(101, 100), (10_000, 100), (10**6, 65_536)])
def test_longer_text_keeps_its_start_and_says_how_much_was_cut(length: int, limit: int) -> None:
    kept = clipped("a" * length, limit)

    assert limit - 2 <= len(kept) <= limit
    start = kept.split("\n[")[0]
    assert set(start) == {"a"}
    assert kept.endswith(f"[… cut: {length - len(start)} more characters]")


def test_a_limit_shorter_than_the_note_still_holds() -> None:
    assert clipped("a" * 500, 5) == "aaaaa"

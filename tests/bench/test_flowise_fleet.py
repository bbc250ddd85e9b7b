"""bench/flowise_fleet.py: made-up Flowise servers answering by their hidden profiles."""

from __future__ import annotations

import random

from backends.adapters.flowise_records import discovered_flow
from bench.flowise_fleet import chatflows, draw
from bench.learning_scenarios import Profile


def test_a_profile_that_never_answers_fails_in_its_failure_time() -> None:
    rng = random.Random(1)  # noqa: S311 - made-up outcomes

    assert {draw(Profile(0.0, 1.0, fail_seconds=3.0), rng) for _ in range(20)} == {(False, 3.0)}


def test_answers_come_as_often_as_the_profile_says_around_its_median() -> None:
    rng = random.Random(1)  # noqa: S311 - made-up outcomes

    drawn = [draw(Profile(0.8, 0.2, spread=0.3), rng) for _ in range(2000)]

    answered = sorted(seconds for ok, seconds in drawn if ok)
    assert 0.77 < len(answered) / len(drawn) < 0.83
    assert 0.18 < answered[len(answered) // 2] < 0.22


def test_each_intent_is_a_deployed_chatflow_discovery_reads() -> None:
    found = [discovered_flow(record) for record in chatflows("R1", ["general", "code-review"])]

    assert [(f.external_id, f.name, f.deployed) for f in found] == [
        ("R1-general", "general flow", True),
        ("R1-code-review", "code-review flow", True),
    ]

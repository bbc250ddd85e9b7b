"""bench/storage_report.py: the storage scenario's figures, per question and per million."""

from __future__ import annotations

from bench.storage_report import (
    ROW,
    KeyKind,
    Mode,
    TableSize,
    as_json,
    gb_per_million,
    key_kind,
    median,
    report,
)

MODE = Mode(
    name="one-shot",
    questions=1000,
    seconds=2.0,
    tables={
        "decisions": TableSize(rows=1000, heap=1_400_000, toast=400_000, indexes=200_000),
        "turns": TableSize(rows=1000, heap=300_000, toast=0, indexes=100_000),
    },
    redis={
        "session": KeyKind(keys=1000, memory=460_000, ttls=(86_399, 86_400, 86_400)),
        "snapshot": KeyKind(keys=0, memory=12, ttls=(300,)),
    },
    decision_columns={ROW: 1700.0, "evidence": 880.0, "question": 86.0},
)


def test_a_table_grows_by_the_difference_of_each_part() -> None:
    grown = TableSize(10, 800, 100, 300).minus(TableSize(4, 500, 100, 100))

    assert grown == TableSize(6, 300, 0, 200)
    assert grown.total == 500


def test_a_key_kind_is_named_after_flywheels_own_prefix() -> None:
    assert key_kind("flywheel:session:1b4e28ba") == "session"
    assert key_kind("flywheel:answer:1:general:abc") == "answer"
    assert key_kind("throttle:key:7") == "throttle"


def test_the_median_ttl_of_no_keys_is_none() -> None:
    assert median(()) is None
    assert median((1, 3)) == 2.0


def test_the_report_gives_bytes_per_question_and_gigabytes_per_million() -> None:
    text = report([MODE])

    assert "1,000 questions in 2.0 s (500/s)" in text
    assert "2000" in text  # the decisions: 2,000,000 bytes over 1,000 questions
    assert "PostgreSQL in all" in text
    assert "2400" in text
    assert "24.0 h" in text  # the sessions' median TTL
    assert "snapshot" not in text  # one key rewritten, not a key per question
    assert "evidence 880" in text
    assert "PostgreSQL 2.40 GB, Redis 0.46 GB" in text
    assert gb_per_million(2400) == 2.4


def test_the_json_keeps_every_figure() -> None:
    figures = as_json([MODE])["one-shot"]

    assert figures["postgres"]["decisions"]["per_question"] == 2000
    assert figures["postgres_per_question"] == 2400
    assert figures["redis"]["session"]["median_ttl_seconds"] == 86_400
    assert figures["gb_per_million"]["postgres"] == 2.4
    assert figures["postgres_per_question_packed"] is None  # nothing partitioned


def test_the_report_gives_the_growth_once_the_day_is_packed_too() -> None:
    packed = Mode(
        **{**MODE.__dict__, "packed": {"decisions": TableSize(1000, 1_400_000, 400_000, 120_000)}}
    )

    text = report([packed])

    assert "once the day is packed" in text
    assert "1920   (indexes 120 B/q" in text
    assert "PostgreSQL 2.40 GB (1.92 GB once packed)" in text
    assert as_json([packed])["one-shot"]["postgres_per_question_packed"] == 1920

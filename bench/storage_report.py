"""bench/storage.py's figures as plain values, and the report printed from them.

No Django, no database: what the scenario measured goes in, text or JSON comes out.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

MILLION = 1_000_000
ROW = "(row)"  # in Mode.decision_columns: the whole row's stored size


@dataclass(frozen=True)
class TableSize:
    """One table's bytes on disk (pg_total_relation_size, split): ``heap`` its rows with
    their free-space and visibility maps, ``toast`` its TOAST table (values stored out of
    line, compressed, with its index), ``indexes`` all its own indexes."""

    rows: int = 0
    heap: int = 0
    toast: int = 0
    indexes: int = 0

    @property
    def total(self) -> int:
        return self.heap + self.toast + self.indexes

    def minus(self, before: TableSize) -> TableSize:
        return TableSize(
            self.rows - before.rows,
            self.heap - before.heap,
            self.toast - before.toast,
            self.indexes - before.indexes,
        )


@dataclass(frozen=True)
class KeyKind:
    """Redis keys of one kind (``flywheel:session:...`` is "session"): how many, the sum
    of their MEMORY USAGE, and the TTLs (seconds) of the keys that are new."""

    keys: int = 0
    memory: int = 0
    ttls: tuple[int, ...] = ()


@dataclass(frozen=True)
class Mode:
    """One way of asking, measured: the growth of every table and key kind that grew."""

    name: str
    questions: int
    seconds: float
    tables: dict[str, TableSize]
    redis: dict[str, KeyKind]
    # The decision row's columns: average stored bytes (pg_column_size) over its rows.
    decision_columns: dict[str, float] = field(default_factory=dict)
    # The same growth once the day has passed and its indexes are packed, as beat packs
    # them (flywheel.partitions.partitions_pack); empty where nothing is partitioned.
    packed: dict[str, TableSize] = field(default_factory=dict)

    @property
    def pg_total(self) -> int:
        return sum(t.total for t in self.tables.values())

    @property
    def pg_packed(self) -> int | None:
        return sum(t.total for t in self.packed.values()) if self.packed else None

    @property
    def redis_memory(self) -> int:
        return sum(k.memory for k in self.redis.values())


def key_kind(key: str) -> str:
    """The kind of a cache key without its prefix: ``flywheel:session:<id>`` -> "session"."""
    parts = key.split(":")
    if parts[0] == "flywheel" and len(parts) > 1:
        return parts[1]
    return parts[0]


def per_question(total: int, questions: int) -> float:
    return total / questions if questions else 0.0


def gb_per_million(bytes_per_question: float) -> float:
    """Decimal gigabytes (10^9 bytes) for a million questions."""
    return bytes_per_question * MILLION / 1e9


def median(values: tuple[int, ...]) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    middle = len(ordered) // 2
    if len(ordered) % 2:
        return float(ordered[middle])
    return (ordered[middle - 1] + ordered[middle]) / 2


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    if seconds >= 3000:
        return f"{seconds / 3600:.1f} h"
    if seconds >= 60:
        return f"{seconds / 60:.0f} min"
    return f"{seconds:.0f} s"


def _table_lines(mode: Mode) -> list[str]:
    n = mode.questions
    lines = [
        f"  {'PostgreSQL table':<34}{'rows/q':>8}{'B/q':>9}{'heap':>8}{'toast':>8}{'index':>8}"
    ]
    for name, size in sorted(mode.tables.items(), key=lambda item: -item[1].total):
        lines.append(
            f"  {name:<34}{size.rows / n:>8.2f}{per_question(size.total, n):>9.0f}"
            f"{per_question(size.heap, n):>8.0f}{per_question(size.toast, n):>8.0f}"
            f"{per_question(size.indexes, n):>8.0f}"
        )
    total = per_question(mode.pg_total, n)
    lines.append(f"  {'PostgreSQL in all':<42}{total:>9.0f}")
    if mode.pg_packed is not None:
        indexes = per_question(sum(t.indexes for t in mode.packed.values()), n)
        packed = per_question(mode.pg_packed, n)
        lines.append(
            f"  {'once the day is packed':<42}{packed:>9.0f}"
            f"   (indexes {indexes:.0f} B/q, as beat packs a day that has passed)"
        )
    return lines


def _redis_lines(mode: Mode) -> list[str]:
    n = mode.questions
    lines = [f"  {'Redis keys (kind)':<34}{'keys/q':>8}{'B/q':>9}{'median TTL':>12}"]
    for kind, keys in sorted(mode.redis.items(), key=lambda item: -item[1].memory):
        if not keys.keys and abs(keys.memory) < n:  # a key rewritten, not one per question
            continue
        lines.append(
            f"  {kind:<34}{keys.keys / n:>8.2f}{per_question(keys.memory, n):>9.0f}"
            f"{_duration(median(keys.ttls)):>12}"
        )
    lines.append(f"  {'Redis in all':<42}{per_question(mode.redis_memory, n):>9.0f}")
    return lines


def _biggest_lines(mode: Mode) -> list[str]:
    if not mode.tables:
        return []
    name, size = max(mode.tables.items(), key=lambda item: item[1].total)
    if not size.total:
        return []
    share = f"{size.heap / size.total:.0%} heap, {size.toast / size.total:.0%} TOAST, "
    lines = [f"  biggest, {name}: {share}{size.indexes / size.total:.0%} indexes"]
    columns = dict(mode.decision_columns)
    row = columns.pop(ROW, None)
    if row is not None:
        top = sorted(columns.items(), key=lambda item: -item[1])[:6]
        inside = ", ".join(f"{column} {size:.0f}" for column, size in top)
        lines.append(f"  a decision row, {row:.0f} bytes stored on average: {inside}")
    return lines


def report(modes: list[Mode]) -> str:
    """The readable report: per mode, bytes per question per table and per key kind, and
    the totals per million questions."""
    lines: list[str] = []
    for mode in modes:
        rate = mode.questions / mode.seconds if mode.seconds else 0.0
        lines.append(
            f"{mode.name}: {mode.questions:,} questions in {mode.seconds:.1f} s ({rate:.0f}/s)"
        )
        lines += _table_lines(mode) + _redis_lines(mode) + _biggest_lines(mode)
        pg = gb_per_million(per_question(mode.pg_total, mode.questions))
        redis = gb_per_million(per_question(mode.redis_memory, mode.questions))
        if mode.pg_packed is not None:
            packed = gb_per_million(per_question(mode.pg_packed, mode.questions))
            pg_text = f"{pg:.2f} GB ({packed:.2f} GB once packed)"
        else:
            pg_text = f"{pg:.2f} GB"
        lines.append(
            f"  per million questions: PostgreSQL {pg_text}, "
            f"Redis {redis:.2f} GB (while the keys live)"
        )
    return "\n".join(lines)


def as_json(modes: list[Mode]) -> dict[str, Any]:
    """The figures for machines: per mode, raw bytes and bytes per question."""
    out: dict[str, Any] = {}
    for mode in modes:
        n = mode.questions
        out[mode.name] = {
            "questions": n,
            "seconds": round(mode.seconds, 3),
            "postgres": {
                name: {**asdict(size), "total": size.total, "per_question": size.total / n}
                for name, size in mode.tables.items()
            },
            "postgres_per_question": per_question(mode.pg_total, n),
            "postgres_per_question_packed": (
                None if mode.pg_packed is None else per_question(mode.pg_packed, n)
            ),
            "redis": {
                kind: {
                    "keys": keys.keys,
                    "memory": keys.memory,
                    "per_question": keys.memory / n,
                    "median_ttl_seconds": median(keys.ttls),
                }
                for kind, keys in mode.redis.items()
            },
            "redis_per_question": per_question(mode.redis_memory, n),
            "decision_columns": mode.decision_columns,
            "gb_per_million": {
                "postgres": gb_per_million(per_question(mode.pg_total, n)),
                "redis": gb_per_million(per_question(mode.redis_memory, n)),
            },
        }
    return out

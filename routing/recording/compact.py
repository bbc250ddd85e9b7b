"""What a decision row keeps of its candidates, fallback chain and evidence, and how
it is read back as a person reads it.

The row keeps ids where another row holds the text (Backend, Flow, IntentPattern,
ScopePattern), arrays where an object would repeat its keys (the JSON holds each
object's keys with it), and the numbers the trace shows. Rows written before keep
the earlier shape: an object per candidate and attempt, names and pattern texts in
full. Every reader goes through :func:`read`, which takes both and gives the
earlier shape back (names as their rows hold them today).

``candidates``, one array per candidate, in the order routing ranked them::

    [backend id, flow id, score, success, success margin, typical ms, attempts,
     expected seconds, generic, arm]

  the score to 3 decimals, as the trace shows it; the estimate's numbers as the
  answer gives them (Candidate.as_dict), so the "why" read back is the answer's;
  ``arm`` only on the first candidate of an A/B split's question. Not kept: the
  backend's name and kind, the flow's name and external id (their rows hold them),
  and the score's factors (match, health, performance, tokens), which no page shows.

``fallback_chain``, one array per attempt, in order::

    [backend id, flow id, ok, latency ms, error type, error, hedged]

  the latency to 0.1 ms; from the error type on, what is empty ("", false) is left
  off the end: ``[3, 7, true, 412.5]`` answered.

``evidence``, an object with the earlier keys, but:

- ``intent``: each matched intent rule as its IntentPattern id (a number), other
  evidence (the topic a follow-up continues, the model's verdict) as its text; left
  out when there is none;
- ``query_type.evidence``: each scope's matched rules as their ScopePattern ids;
- ``explored`` and ``retried``: ``true`` (it was the first candidate's backend)
  rather than the backend's name;
- ``cached_from``: ``[backend id, flow id]``, whose answer the cache served;
- ``why`` is not kept: routing.selection.words.why says it again from the
  candidates, in the same words;
- ``intent_summary``, the intent's evidence in words (some 80 characters), is kept
  where it cannot be said again: the model's probabilities, a threshold, a topic are
  not kept. Rules are (:func:`summary_said_again`): matched by rules, the question
  and the rules' ids say it again as routing said it (``matched 'review' (code-review
  rule 2)``), with the rules as they read today, as the raw evidence is.

A backend, flow or rule deleted since reads as "deleted backend #3" (flow, rule).
"""

from __future__ import annotations

import functools
import itertools
import operator
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from django.db.models import Model

from backends.models import Backend
from chatflows.models import Flow
from routing.classification.rules import CompiledRule
from routing.classification.words import listed, said_by_rules
from routing.models import IntentPattern, PatternKind, ScopePattern
from routing.patterns import compile_pattern
from routing.selection.attempt import Attempt
from routing.selection.scoring import Candidate
from routing.selection.words import why

# The stored arrays' places, named by the keys of the earlier shape.
CANDIDATE = (
    "backend",
    "flow",
    "score",
    "success",
    "success_margin",
    "typical_ms",
    "attempts",
    "expected_seconds",
    "generic",
    "arm",
)
ATTEMPT = ("backend", "flow", "ok", "latency_ms", "error_type", "error", "hedged")


def _trimmed(row: list[Any], keep: int) -> list[Any]:
    """``row`` without the empty values ("" or false) at its end, past its first ``keep``."""
    while len(row) > keep and (row[-1] == "" or row[-1] is False):
        row.pop()
    return row


def pack_candidates(candidates: Iterable[Candidate]) -> list[list[Any]]:
    """The candidates as the row keeps them (:data:`CANDIDATE`)."""
    packed = []
    for c in candidates:
        shown = c.as_dict()  # rounded as the answer rounds them: the why said again is its
        row = [
            c.backend.id,
            c.flow.id,
            round(c.score, 3),
            shown["success"],
            shown["success_margin"],
            shown["typical_ms"],
            shown["attempts"],
            shown["expected_seconds"],
            c.generic,
            c.arm,
        ]
        packed.append(_trimmed(row, 9))
    return packed


def pack_attempts(attempts: Iterable[Attempt]) -> list[list[Any]]:
    """The fallback chain as the row keeps it (:data:`ATTEMPT`)."""
    return [
        _trimmed(
            [
                a.backend_id,
                a.flow_id,
                a.ok,
                round(a.latency_ms, 1),
                a.error_type,
                a.error,
                a.hedged,
            ],
            4,
        )
        for a in attempts
    ]


def pack_rules(evidence: Sequence[str], ids: Sequence[int]) -> list[str | int]:
    """``evidence`` with its last ``len(ids)`` entries (the matched rules' patterns) as
    those rules' ids; a rule without one (0: compiled from the shipped defaults, not
    read from the database) keeps its text."""
    notes = len(evidence) - len(ids)
    if notes < 0:  # not the rules' patterns: kept as it is
        return list(evidence)
    rules = zip(ids, evidence[notes:], strict=True)
    return [*evidence[:notes], *(pk or pattern for pk, pattern in rules)]


def summary_said_again(method: str, rule_ids: Sequence[int]) -> bool:
    """Whether a decision's intent summary is said again from its question and rules
    when read (:func:`read`), and so not kept: an intent the rules gave, from rules
    read from the database (an id each)."""
    return method == "rules" and bool(rule_ids) and all(rule_ids)


# --- Reading back ------------------------------------------------------------------


def _id(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


@dataclass(frozen=True)
class Names:
    """The rows a set of decisions refers to by id: backends (name, kind), flows (name,
    external id), intent and scope rules (pattern)."""

    backends: Mapping[int, tuple[str, str]] = field(default_factory=dict)
    flows: Mapping[int, tuple[str, str]] = field(default_factory=dict)
    # An intent rule's pattern, kind and number (its place on its intent's admin page).
    intent_rules: Mapping[int, tuple[str, str, int]] = field(default_factory=dict)
    scope_rules: Mapping[int, tuple[str]] = field(default_factory=dict)

    def backend(self, pk: int) -> tuple[str, str | None]:
        """Its name and kind; a deleted one's: "deleted backend #3", None."""
        return self.backends.get(pk, (f"deleted backend #{pk}", None))

    def flow(self, pk: int) -> tuple[str, str | None]:
        """Its name and external id; a deleted one's: "deleted flow #7", None."""
        return self.flows.get(pk, (f"deleted flow #{pk}", None))

    def rule(self, value: str | int, *, scope: bool = False) -> str:
        """An intent rule's (a scope rule's) pattern, from its id; text as it is."""
        if not _id(value):
            return str(value)
        if scope:
            return self.scope_rules.get(int(value), (f"deleted rule #{value}",))[0]
        found = self.intent_rules.get(int(value))
        return found[0] if found else f"deleted rule #{value}"

    def compiled(self, intent: str, pk: int) -> CompiledRule | None:
        """An intent rule as classification compiles it (None: deleted since)."""
        found = self.intent_rules.get(pk)
        if found is None:
            return None
        pattern, kind, number = found
        regex = kind == PatternKind.REGEX
        return CompiledRule(intent, pattern, regex, 1.0, _matcher(pattern, regex), number, pk)


@functools.lru_cache(maxsize=512)
def _matcher(pattern: str, regex: bool) -> Any:
    return compile_pattern(pattern, is_regex=regex)


class Stored(Protocol):
    """What a decision row holds that :func:`read` reads (a RoutingDecision)."""

    question: str
    intent: str
    intent_method: str
    evidence: Any
    candidates: Any
    fallback_chain: Any


def _packed(rows: Any) -> list[list[Any]]:
    return [row for row in rows or () if isinstance(row, list)]


def _rule_ids(evidence: Mapping[str, Any]) -> tuple[set[int], set[int]]:
    intent = {e for e in evidence.get("intent") or () if _id(e)}
    query_type = evidence.get("query_type") or {}
    scopes = (query_type.get("evidence") or {}).values() if isinstance(query_type, dict) else ()
    return intent, {e for found in scopes for e in found if _id(e)}


def _rows(model: type[Model], ids: Collection[int], *columns: str) -> dict[int, tuple[Any, ...]]:
    """``columns`` of the rows of ``model`` among ``ids``, by id (no query for no ids)."""
    if not ids:
        return {}
    found = model._default_manager.filter(pk__in=ids).values_list("pk", *columns)
    return {pk: tuple(values) for pk, *values in found}


def names_for(decisions: Iterable[Stored]) -> Names:
    """The names of every backend, flow and rule the decisions' compact columns refer to:
    one query for each kind of row referred to at all."""
    backends: set[int] = set()
    flows: set[int] = set()
    intent_rules: set[int] = set()
    scope_rules: set[int] = set()
    for decision in decisions:
        for row in (*_packed(decision.candidates), *_packed(decision.fallback_chain)):
            backends.add(row[0])
            flows.add(row[1])
        evidence = decision.evidence or {}
        intent, scope = _rule_ids(evidence)
        cached = evidence.get("cached_from")
        if isinstance(cached, list):
            backends.add(cached[0])
            flows.add(cached[1])
        intent_rules |= intent
        scope_rules |= scope
    return names_of(backends, flows, intent_rules, scope_rules)


def names_of(
    backends: Collection[int],
    flows: Collection[int],
    intent_rules: Collection[int] = (),
    scope_rules: Collection[int] = (),
) -> Names:
    """The names of these backends, flows and rules, by id."""
    return Names(
        backends=_rows(Backend, backends, "name", "kind"),
        flows=_rows(Flow, flows, "name", "external_id"),
        intent_rules=_numbered(intent_rules),
        scope_rules=_rows(ScopePattern, scope_rules, "pattern"),
    )


def _numbered(ids: Collection[int]) -> dict[int, tuple[str, str, int]]:
    """The pattern, kind and number of the intent rules among ``ids``: numbered as
    their intents' admin pages list them (routing.classification.rules), disabled
    rules included."""
    if not ids:
        return {}
    intents = IntentPattern.objects.filter(pk__in=ids).values("intent_id")
    every = IntentPattern.objects.filter(intent_id__in=intents).values_list(
        "pk", "intent_id", "pattern", "kind"
    )
    found: dict[int, tuple[str, str, int]] = {}
    for _, rules in itertools.groupby(every, key=operator.itemgetter(1)):
        for number, (pk, _, pattern, kind) in enumerate(rules, 1):
            if pk in ids:
                found[pk] = (pattern, kind, number)
    return found


def unpack_candidates(stored: Any, names: Names) -> list[dict[str, Any]]:
    """The candidates as the earlier shape had them (Candidate.as_dict, without the
    score's factors for a compact row)."""
    found = []
    for row in stored or ():
        if not isinstance(row, list):
            found.append(dict(row))
            continue
        kept = dict(zip(CANDIDATE, row, strict=False))
        backend, kind = names.backend(kept.pop("backend"))
        flow, external_id = names.flow(kept.pop("flow"))
        found.append({"backend": backend, "kind": kind, "flow": flow, "flow_id": external_id})
        found[-1].update((key, kept[key]) for key in CANDIDATE[2:] if key in kept)
    return found


def unpack_attempts(stored: Any, names: Names) -> list[dict[str, Any]]:
    """The fallback chain as the earlier shape had it (Attempt.as_dict)."""
    found = []
    for row in stored or ():
        if not isinstance(row, list):
            found.append(dict(row))
            continue
        kept = dict(zip(ATTEMPT, row, strict=False))
        attempt = {
            "backend": names.backend(kept["backend"])[0],
            "flow": names.flow(kept["flow"])[0],
            "ok": kept["ok"],
            "latency_ms": kept["latency_ms"],
            "error_type": kept.get("error_type", ""),
            "error": kept.get("error", ""),
        }
        if kept.get("hedged"):
            attempt["hedged"] = True
        found.append(attempt)
    return found


def unpack_evidence(
    stored: Any, candidates: Sequence[Mapping[str, Any]], names: Names
) -> dict[str, Any]:
    """The evidence as the earlier shape had it, but for ``why`` (:func:`read` says it
    again); ``candidates`` are the decision's, read back (:func:`unpack_candidates`)."""
    found = dict(stored or {})
    if "intent" in found or "intent_summary" in found:
        found["intent"] = [names.rule(e) for e in found.get("intent") or ()]
    query_type = found.get("query_type")
    if isinstance(query_type, dict) and isinstance(query_type.get("evidence"), dict):
        matched = query_type["evidence"].items()
        query_type = {
            **query_type,
            "evidence": {
                scope: [names.rule(e, scope=True) for e in rules] for scope, rules in matched
            },
        }
        found["query_type"] = query_type
    cached = found.get("cached_from")
    if isinstance(cached, list):
        found["cached_from"] = {
            "backend": names.backend(cached[0])[0],
            "flow": names.flow(cached[1])[0],
        }
    first = candidates[0]["backend"] if candidates else None
    for key in ("explored", "retried"):
        if found.get(key) is True:
            found[key] = first
    return found


def _said_again(decision: Stored, names: Names) -> str | None:
    """The summary of an intent the rules gave (:func:`summary_said_again`), from the
    rules still there, naming those deleted since ("matched 'review' (code-review
    rule 1) and deleted rule #12"); None for a row of an earlier shape (no rule ids)."""
    stored = [int(e) for e in (decision.evidence or {}).get("intent") or () if _id(e)]
    if not stored:
        return None
    rules = {pk: names.compiled(decision.intent, pk) for pk in stored}
    hits = [rule for rule in rules.values() if rule is not None]
    gone = [f"#{pk}" for pk, rule in rules.items() if rule is None]
    deleted = f"deleted rule{'s' if len(gone) > 1 else ''} {listed(gone)}"
    if not hits:
        return f"matched {deleted} ({decision.intent})"
    said = said_by_rules(decision.intent, hits, decision.question)
    return f"{said} and {deleted}" if gone else said


@dataclass(frozen=True)
class Read:
    """A decision's evidence, candidates and fallback chain, as a person reads them."""

    evidence: dict[str, Any]
    candidates: list[dict[str, Any]]
    fallback_chain: list[dict[str, Any]]


def read(decision: Stored, names: Names | None = None) -> Read:
    """``decision``'s JSON columns in the earlier shape, whichever shape they are kept in;
    ``names`` from :func:`names_for` over a page of decisions (by default, this one's)."""
    if names is None:
        names = names_for([decision])
    candidates = unpack_candidates(decision.candidates, names)
    evidence = unpack_evidence(decision.evidence, candidates, names)
    wanted = "intent_summary" not in evidence and decision.intent_method == "rules"
    if wanted and (said := _said_again(decision, names)) is not None:
        evidence["intent_summary"] = said
    if "why" not in evidence and _packed(decision.candidates):
        explored = bool(evidence.get("explored"))
        evidence["why"] = why(candidates, explored=explored, intent=decision.intent)
    return Read(evidence, candidates, unpack_attempts(decision.fallback_chain, names))

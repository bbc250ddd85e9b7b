"""The learned classifiers: their examples, their training, and the newest for every process.

Examples are rows (IntentExample, QueryTypeExample); Flywheel ships a set of
its own in routing/classification/examples/, written for this and kept apart from the test
sets under tests/data/, which measure it. Training (routing.classification.learned) happens
off the hot path: in the Celery task that example changes enqueue, in beat's
minutely check, in ``load_defaults`` and in ``manage.py train_classifier``.
Each training stores a new ClassifierModel version unless the examples are
the ones the newest version learned from.

Every process uses the newest version of each kind: the routing state asks
:func:`classifier_current` when it is rebuilt (off the event loop), which
reads the version number from the shared cache at most every RECHECK_SECONDS
and loads a new artefact from the database only when the number changed. The
swap is one assignment: a query sees the old model or the new, whole.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from django.db import transaction

from flywheel.cache import shared_cache
from routing.classification.embeddings import embeddings_config, examples_embed
from routing.classification.learned import LearnedModel, neighbours_of, train
from routing.models import (
    ClassifierKind,
    ClassifierModel,
    ExampleSource,
    Intent,
    IntentExample,
    QueryTypeExample,
)

logger = logging.getLogger(__name__)

SHIPPED_DIR = Path(__file__).resolve().parent / "examples"
VERSION_KEY = "flywheel:classifier-version:{kind}"
RECHECK_SECONDS = 5.0
KEEP_VERSIONS = 5
KINDS = (ClassifierKind.INTENT, ClassifierKind.QUERY_TYPE)


def _shipped(name: str) -> list[dict[str, str]]:
    path = SHIPPED_DIR / name
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def examples_load_shipped() -> int:
    """Install the shipped examples of each intent and query type that has none of its
    own shipped yet (so an admin's deletions stay deleted). Returns how many."""
    created = 0
    intents = {i.slug: i for i in Intent.objects.all()}
    have = set(
        IntentExample.objects.filter(source=ExampleSource.SHIPPED).values_list(
            "intent__slug", flat=True
        )
    )
    rows = [
        IntentExample(intent=intents[r["intent"]], text=r["text"], source=ExampleSource.SHIPPED)
        for r in _shipped("intents.jsonl")
        if r["intent"] in intents and r["intent"] not in have
    ]
    created += len(IntentExample.objects.bulk_create(rows, ignore_conflicts=True))
    have = set(
        QueryTypeExample.objects.filter(source=ExampleSource.SHIPPED).values_list(
            "query_type", flat=True
        )
    )
    typed = [
        QueryTypeExample(query_type=r["query_type"], text=r["text"], source=ExampleSource.SHIPPED)
        for r in _shipped("query_types.jsonl")
        if r["query_type"] not in have
    ]
    created += len(QueryTypeExample.objects.bulk_create(typed, ignore_conflicts=True))
    return created


# Examples people wrote or corrected: recalled exactly for the very same question.
PEOPLE = (ExampleSource.ADMIN, ExampleSource.CORRECTION)


def _examples(kind: str) -> tuple[list[str], list[str], dict[str, str]]:
    """Texts and labels, sorted (for a stable digest), and the people's labels."""
    rows: list[tuple[str, str, str]]
    if kind == ClassifierKind.INTENT:
        rows = list(
            IntentExample.objects.filter(intent__enabled=True).values_list(
                "text", "intent__slug", "source"
            )
        )
    else:
        rows = list(QueryTypeExample.objects.values_list("text", "query_type", "source"))
    rows.sort()
    exact = {text: label for text, label, source in rows if source in PEOPLE}
    return [text for text, _, _ in rows], [label for _, label, _ in rows], exact


def _digest(texts: list[str], labels: list[str]) -> str:
    return hashlib.sha256(json.dumps([texts, labels]).encode()).hexdigest()


def classifier_train(
    *, kind: str, force: bool = False, progress: Callable[[str], None] | None = None
) -> ClassifierModel | None:
    """Train a new version of ``kind``'s classifier on its examples and announce it;
    ``progress`` hears, before a training starts, what it is about to do (a person
    waiting at a terminal).

    Returns the newest version: the existing one when it learned from exactly these
    examples (unless ``force``); None when the examples hold fewer than two labels.
    """
    texts, labels, exact = _examples(kind)
    if len(set(labels)) < 2:
        return None
    config = embeddings_config()
    by_embedding = [config.model] if config is not None else []
    digest = _digest(texts, labels + sorted(exact) + by_embedding)
    newest = ClassifierModel.objects.filter(kind=kind).defer("artefact").first()
    if newest is not None and newest.digest == digest and not force:
        # Announce it again: a reader that found no number may have set an older one.
        shared_cache().set(VERSION_KEY.format(kind=kind), newest.pk, timeout=None)
        return newest
    if progress is not None:
        progress(
            f"Training the {kind} classifier on {len(texts)} examples (a minute or so on a "
            "busy machine; later starts reuse it until the examples change)..."
        )
    started = time.perf_counter()
    model = train(texts, labels, exact=exact)
    if config is not None:
        vectors = examples_embed(config, texts)
        if vectors is None:  # learned without them: the next check tries again
            digest = _digest(texts, labels + sorted(exact))
        else:
            indices = [model.labels.index(label) for label in labels]
            model = replace(model, neighbours=neighbours_of(config.model, vectors, indices))
    with transaction.atomic():
        row = ClassifierModel.objects.create(
            kind=kind,
            examples=model.examples,
            accuracy=model.accuracy,
            labels=list(model.labels),
            digest=digest,
            artefact=model.as_json(),
        )
        keep = ClassifierModel.objects.filter(kind=kind).values_list("pk", flat=True)[
            :KEEP_VERSIONS
        ]
        ClassifierModel.objects.filter(kind=kind).exclude(pk__in=list(keep)).delete()
    shared_cache().set(VERSION_KEY.format(kind=kind), row.pk, timeout=None)
    logger.info(
        "Trained the %s classifier v%d on %d examples in %.1f s (cross-validated %.1f %%)",
        kind,
        row.pk,
        model.examples,
        time.perf_counter() - started,
        100 * model.accuracy,
    )
    return row


def classifiers_train(
    *, force: bool = False, progress: Callable[[str], None] | None = None
) -> list[ClassifierModel]:
    """Train every kind whose examples changed (beat, load_defaults, the command)."""
    trained = [classifier_train(kind=kind, force=force, progress=progress) for kind in KINDS]
    return [row for row in trained if row is not None]


class _Newest:
    """This process's newest model of each kind, rechecked every RECHECK_SECONDS."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._held: dict[str, tuple[int, LearnedModel | None]] = {}
        self._checked: dict[str, float] = {}

    def get(self, kind: str) -> LearnedModel | None:
        now = time.monotonic()
        held = self._held.get(kind)
        if held is not None and now - self._checked.get(kind, 0.0) < RECHECK_SECONDS:
            return held[1]
        with self._lock:
            version = _announced(kind)
            held = self._held.get(kind)
            if held is None or held[0] != version:
                held = (version, _load(version))
                self._held[kind] = held
            self._checked[kind] = now
            return held[1]

    def clear(self) -> None:
        with self._lock:
            self._held.clear()
            self._checked.clear()


def _announced(kind: str) -> int:
    """The newest version's number: from the cache, else the database (0: none)."""
    version = shared_cache().get(VERSION_KEY.format(kind=kind))
    if isinstance(version, int):
        return version
    newest = ClassifierModel.objects.filter(kind=kind).values_list("pk", flat=True).first()
    # Only if still absent: a training may have announced a newer version meanwhile.
    shared_cache().add(VERSION_KEY.format(kind=kind), newest or 0, timeout=None)
    return newest or 0


def _load(version: int) -> LearnedModel | None:
    if not version:
        return None
    row = ClassifierModel.objects.filter(pk=version).first()
    if row is None:  # removed since it was announced: the next check finds the newest
        return None
    return LearnedModel.from_json(row.artefact, version=row.pk)


_newest = _Newest()


def classifier_current(kind: str) -> LearnedModel | None:
    """The newest learned classifier of ``kind`` (sync: call it off the event loop)."""
    return _newest.get(kind)


def classifiers_forget() -> None:
    """Drop this process's models (tests)."""
    _newest.clear()

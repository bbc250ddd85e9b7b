"""Celery tasks of routing: thin doors onto its services (run by beat)."""

from __future__ import annotations

from celery import shared_task

from routing.classification.training import classifier_train, classifiers_train
from routing.recording.performance import evidence_publish_all
from routing.selection.state import policy_values


@shared_task(name="routing.publish_performance")
def publish_performance() -> dict[str, int]:
    """Share again what was learned of every backend attempted recently."""
    return {"published": evidence_publish_all(window=policy_values().performance_window)}


@shared_task(name="routing.train_classifier")
def train_classifier(kind: str) -> dict[str, int | None]:
    """Train ``kind``'s classifier on its examples (enqueued when they change)."""
    row = classifier_train(kind=kind)
    return {"version": row.pk if row else None}


@shared_task(name="routing.train_classifiers")
def train_classifiers() -> dict[str, list[int]]:
    """Train the classifiers whose examples changed since their newest version (beat)."""
    return {"versions": [row.pk for row in classifiers_train()]}

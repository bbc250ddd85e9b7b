"""Keep compiled rules, the policy (its A/B splits too) and the learned classifiers fresh
when an admin edits them.

Other processes are told twice: at once, and again when the edit's
transaction commits. A process told only at once could recompile from the
rows as they were before the commit and keep that stale copy, under the
new version, until the next edit.
"""

from __future__ import annotations

import logging
from typing import Any

from django.db import transaction
from django.db.models.signals import post_delete, post_save
from django.dispatch import receiver

from flywheel.cache import forget
from routing.classification.rules import intent_rules_changed
from routing.models import (
    ClassifierKind,
    Intent,
    IntentExample,
    IntentPattern,
    QueryTypeExample,
    RoutingPolicy,
    ScopePattern,
    Split,
    SplitArm,
)
from routing.selection.state import POLICY_KEY


@receiver([post_save, post_delete], sender=Intent)
@receiver([post_save, post_delete], sender=IntentPattern)
@receiver([post_save, post_delete], sender=ScopePattern)
def _rules_changed(sender: type, **kwargs: Any) -> None:
    intent_rules_changed()
    transaction.on_commit(intent_rules_changed)


@receiver([post_save, post_delete], sender=RoutingPolicy)
@receiver([post_save, post_delete], sender=Split)
@receiver([post_save, post_delete], sender=SplitArm)
def _policy_changed(sender: type, **kwargs: Any) -> None:
    def forget_policy() -> None:
        forget(POLICY_KEY)

    forget_policy()
    transaction.on_commit(forget_policy)


logger = logging.getLogger(__name__)


@receiver([post_save, post_delete], sender=IntentExample)
@receiver([post_save, post_delete], sender=QueryTypeExample)
def _examples_changed(sender: type, **kwargs: Any) -> None:
    """Retrain once the change commits, on a worker (beat's minutely check catches a
    change whose task was lost)."""
    kind = ClassifierKind.INTENT if sender is IntentExample else ClassifierKind.QUERY_TYPE

    def enqueue() -> None:
        from routing.tasks import train_classifier

        try:
            train_classifier.delay(kind)
        except Exception as err:  # the broker is down: beat's check trains later
            logger.warning("Retraining the %s classifier is left to beat: %s", kind, err)

    transaction.on_commit(enqueue)

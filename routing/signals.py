"""Keep compiled rules and the policy fresh in every process when an admin edits them.

Other processes are told twice: at once, and again when the edit's
transaction commits. A process told only at once could recompile from the
rows as they were before the commit and keep that stale copy, under the
new version, until the next edit.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.db.models.signals import post_delete, post_save
from django.dispatch import receiver

from flywheel.cache import shared_cache
from routing.models import Intent, IntentPattern, RoutingPolicy, ScopePattern
from routing.rules import intent_rules_changed
from routing.state import POLICY_KEY


@receiver([post_save, post_delete], sender=Intent)
@receiver([post_save, post_delete], sender=IntentPattern)
@receiver([post_save, post_delete], sender=ScopePattern)
def _rules_changed(sender: type, **kwargs: Any) -> None:
    intent_rules_changed()
    transaction.on_commit(intent_rules_changed)


@receiver([post_save, post_delete], sender=RoutingPolicy)
def _policy_changed(sender: type, **kwargs: Any) -> None:
    def forget_policy() -> None:
        shared_cache().delete(POLICY_KEY)

    forget_policy()
    transaction.on_commit(forget_policy)

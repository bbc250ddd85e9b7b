"""Keep compiled rules fresh in every process when an admin edits them."""

from __future__ import annotations

from typing import Any

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


@receiver([post_save, post_delete], sender=RoutingPolicy)
def _policy_changed(sender: type, **kwargs: Any) -> None:
    shared_cache().delete(POLICY_KEY)

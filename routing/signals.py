"""Keep compiled intent rules fresh in every process when an admin edits them."""

from __future__ import annotations

from typing import Any

from django.db.models.signals import post_delete, post_save
from django.dispatch import receiver

from routing.models import Intent, IntentPattern
from routing.rules import intent_rules_changed


@receiver([post_save, post_delete], sender=Intent)
@receiver([post_save, post_delete], sender=IntentPattern)
def _rules_changed(sender: type, **kwargs: Any) -> None:
    intent_rules_changed()

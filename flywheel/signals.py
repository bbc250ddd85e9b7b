"""Forget cached API keys as soon as a key or its tenant changes."""

from __future__ import annotations

from typing import Any

from django.db.models.signals import post_delete, post_save
from django.dispatch import receiver

from flywheel.models import ApiKey, Tenant
from flywheel.services import api_key_forget


@receiver([post_save, post_delete], sender=ApiKey)
def _key_changed(sender: type, instance: ApiKey, **kwargs: Any) -> None:
    api_key_forget(instance.hashed_key)


@receiver([post_save, post_delete], sender=Tenant)
def _tenant_changed(sender: type, instance: Tenant, **kwargs: Any) -> None:
    for digest in ApiKey.objects.filter(tenant_id=instance.pk).values_list("hashed_key", flat=True):
        api_key_forget(digest)

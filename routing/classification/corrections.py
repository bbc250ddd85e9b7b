"""A person's correction of a decision's intent: a labelled example the classifier learns from."""

from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from flywheel.errors import ValidationError
from routing.models import (
    ExampleSource,
    Intent,
    IntentExample,
    RoutingDecision,
)


@transaction.atomic
def decision_correct(*, decision: RoutingDecision, intent: str) -> RoutingDecision:
    """Say what ``decision``'s intent really was.

    The decision keeps the intent it detected and records the correction; its
    question becomes a ``correction`` example of ``intent`` (replacing an earlier
    label people gave the same question), so the classifier is retrained (a
    worker task, at commit) and the same question gets ``intent`` once the new
    version is in use (seconds; beat's check within a minute without a worker).
    Raises ValidationError for an unknown or disabled intent.
    """
    target = Intent.objects.filter(slug=intent, enabled=True).first()
    if target is None:
        known = sorted(Intent.objects.filter(enabled=True).values_list("slug", flat=True))
        raise ValidationError(
            f"Unknown or disabled intent {intent!r}.", details={"intent": intent, "known": known}
        )
    # What people said of this question before (an admin, an earlier correction, the LLM)
    # gives way; a shipped example stays, and exact recall follows people's labels only.
    IntentExample.objects.filter(text=decision.question).exclude(intent=target).exclude(
        source=ExampleSource.SHIPPED
    ).delete()
    IntentExample.objects.update_or_create(
        intent=target, text=decision.question, defaults={"source": ExampleSource.CORRECTION}
    )
    decision.corrected_intent, decision.corrected_at = target.slug, timezone.now()
    decision.save(update_fields=["corrected_intent", "corrected_at"])
    return decision

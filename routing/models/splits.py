"""A/B splits an admin sets per intent: which backends (or flows) answer first, and how often."""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models

from backends.models import Backend
from chatflows.models import Flow
from routing.models.rules import Intent


class Split(models.Model):
    """An intent's questions go first to one of the arms, drawn in proportion to their
    weights, instead of to the backend routing would choose; routing's order follows as
    the fallback. The analytics page compares the arms."""

    intent = models.OneToOneField(Intent, on_delete=models.CASCADE, related_name="split")
    enabled = models.BooleanField(
        default=True, help_text="Off: the intent is routed as usual; the arms are kept."
    )
    note = models.CharField(max_length=200, blank=True, help_text="What the split tests.")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name = "A/B split"
        ordering = ["intent__slug"]

    def __str__(self) -> str:
        return f"A/B split of {self.intent.slug}"


class SplitArm(models.Model):
    """One side of a split: a backend, or one of its flows, and its share of questions."""

    split = models.ForeignKey(Split, on_delete=models.CASCADE, related_name="arms")
    label = models.CharField(max_length=40, help_text="How the analytics page names it: A, B…")
    backend = models.ForeignKey(Backend, on_delete=models.CASCADE, related_name="+")
    flow = models.ForeignKey(
        Flow,
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="+",
        help_text="Blank: the backend's flow routing would use for the intent.",
    )
    weight = models.PositiveIntegerField(
        default=50,
        validators=[MinValueValidator(1), MaxValueValidator(1000)],
        help_text="Its share is its weight over the sum of the arms' weights (those that "
        "can answer at the time: an arm down or in cooldown gives its share to the others).",
    )

    class Meta:
        verbose_name = "arm"
        ordering = ["split", "label"]
        constraints = [
            models.UniqueConstraint(fields=["split", "label"], name="splitarm_label_unique"),
            models.CheckConstraint(condition=models.Q(weight__gte=1), name="splitarm_weight_gte_1"),
        ]

    def __str__(self) -> str:
        return f"{self.label}: {self.backend.name}{f' / {self.flow.name}' if self.flow else ''}"

    def clean(self) -> None:
        super().clean()
        if self.flow is not None and self.flow.backend_id != self.backend_id:
            raise ValidationError({"flow": "This flow is on another backend."})

"""Examples people, the shipped set and the LLM labelled, and the classifiers trained on them."""

from __future__ import annotations

from django.db import models
from django.db.models import F
from django.db.models.functions import MD5

from routing.models.decisions import QueryType
from routing.models.rules import Intent


class ExampleSource(models.TextChoices):
    SHIPPED = "shipped", "Shipped with Flywheel"
    ADMIN = "admin", "Written by an admin"
    CORRECTION = "correction", "A corrected decision"
    LLM = "llm", "Labelled by the LLM"


class _Example(models.Model):
    """A labelled question the learned classifiers learn from (routing.classification.training)."""

    text = models.TextField()
    source = models.CharField(
        max_length=20, choices=ExampleSource.choices, default=ExampleSource.ADMIN
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        abstract = True


class IntentExample(_Example):
    """A question labelled with its intent."""

    intent = models.ForeignKey(Intent, on_delete=models.CASCADE, related_name="examples")

    class Meta:
        ordering = ["intent__slug", "id"]
        # On a digest of the text: a question may be longer than an index row can hold.
        constraints = [
            models.UniqueConstraint(F("intent"), MD5("text"), name="intent_example_unique")
        ]

    def __str__(self) -> str:
        return f"{self.intent.slug}: {self.text[:60]}"


class QueryTypeExample(_Example):
    """A question labelled GLOBAL, LOCAL or HYBRID."""

    query_type = models.CharField(max_length=10, choices=QueryType.choices)

    class Meta:
        ordering = ["query_type", "id"]
        constraints = [
            models.UniqueConstraint(F("query_type"), MD5("text"), name="query_type_example_unique")
        ]

    def __str__(self) -> str:
        return f"{self.query_type}: {self.text[:60]}"


class ClassifierKind(models.TextChoices):
    INTENT = "intent", "Intent"
    QUERY_TYPE = "query_type", "Query type"


class ClassifierModel(models.Model):
    """A classifier trained on the examples (routing.classification.learned), one version
    per training; every process uses the newest of its kind."""

    kind = models.CharField(max_length=20, choices=ClassifierKind.choices)
    created_at = models.DateTimeField(auto_now_add=True)
    examples = models.PositiveIntegerField(help_text="How many examples it learned from.")
    accuracy = models.FloatField(help_text="Cross-validated accuracy on its examples.")
    labels = models.JSONField(default=list)
    digest = models.CharField(max_length=64, help_text="Of the examples it learned from.")
    artefact = models.JSONField(
        help_text="The fitted model as numbers (routing.classification.learned)."
    )

    class Meta:
        ordering = ["-id"]
        indexes = [models.Index(fields=["kind", "-id"], name="classifier_kind_newest")]

    def __str__(self) -> str:
        return f"{self.kind} v{self.pk} ({self.examples} examples, {self.accuracy:.1%})"

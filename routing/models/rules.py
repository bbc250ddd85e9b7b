"""Intents and their rule patterns, and the scope patterns of query types (seed 004)."""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models

from routing.patterns import validate_keyword, validate_regex


class Intent(models.Model):
    """What a question asks for; flows declare the intents they serve."""

    slug = models.SlugField(max_length=50, unique=True)
    name = models.CharField(max_length=100)
    description = models.TextField(blank=True)
    enabled = models.BooleanField(default=True)
    priority = models.IntegerField(
        default=0, help_text="Breaks ties between intents that score the same; higher wins."
    )

    class Meta:
        ordering = ["-priority", "slug"]

    def __str__(self) -> str:
        return self.slug


class PatternKind(models.TextChoices):
    KEYWORD = "keyword", "Keyword or phrase"
    REGEX = "regex", "Regular expression"


class _RulePattern(models.Model):
    """A rule text plus how it is read: as a keyword or as a regular expression."""

    kind = models.CharField(max_length=10, choices=PatternKind.choices, default=PatternKind.KEYWORD)
    pattern = models.CharField(max_length=2000)
    weight = models.FloatField(
        default=1.0, validators=[MinValueValidator(0.01), MaxValueValidator(10.0)]
    )
    enabled = models.BooleanField(default=True)

    class Meta:
        abstract = True

    def save(self, *args: object, **kwargs: object) -> None:
        # Rules run on every question: never store one that was not checked,
        # whichever door (admin, API, shell, fixture loader) saves it.
        self.clean()
        super().save(*args, **kwargs)  # type: ignore[arg-type]

    def clean(self) -> None:
        super().clean()
        validate = validate_regex if self.kind == PatternKind.REGEX else validate_keyword
        try:
            validate(self.pattern)
        except ValidationError as err:
            raise ValidationError({"pattern": err.messages}) from err


class IntentPattern(_RulePattern):
    intent = models.ForeignKey(Intent, on_delete=models.CASCADE, related_name="patterns")

    class Meta:
        ordering = ["intent__slug", "-weight", "pattern"]
        constraints = [
            models.UniqueConstraint(
                fields=["intent", "kind", "pattern"], name="intentpattern_unique_per_intent"
            ),
            models.CheckConstraint(
                condition=models.Q(kind__in=PatternKind.values), name="intentpattern_kind_valid"
            ),
            models.CheckConstraint(
                condition=models.Q(weight__gt=0, weight__lte=10), name="intentpattern_weight_range"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.intent.slug}: {self.pattern}"


class QueryScope(models.TextChoices):
    GLOBAL = "global", "Global"
    LOCAL = "local", "Local"


class ScopePattern(_RulePattern):
    """A rule that marks a question as GLOBAL (corpus-wide) or LOCAL (specific)."""

    kind = models.CharField(max_length=10, choices=PatternKind.choices, default=PatternKind.REGEX)
    scope = models.CharField(max_length=10, choices=QueryScope.choices)

    class Meta:
        ordering = ["scope", "-weight", "pattern"]
        constraints = [
            models.UniqueConstraint(
                fields=["scope", "kind", "pattern"], name="scopepattern_unique_per_scope"
            ),
            models.CheckConstraint(
                condition=models.Q(scope__in=QueryScope.values), name="scopepattern_scope_valid"
            ),
            models.CheckConstraint(
                condition=models.Q(kind__in=PatternKind.values), name="scopepattern_kind_valid"
            ),
            models.CheckConstraint(
                condition=models.Q(weight__gt=0, weight__lte=10), name="scopepattern_weight_range"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.scope}: {self.pattern}"

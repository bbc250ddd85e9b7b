"""The routing policy: one row of weights, thresholds, cooldowns and TTLs, edited in the admin."""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.core.validators import BaseValidator, MaxValueValidator, MinValueValidator
from django.db import models


def _unit_interval() -> list[BaseValidator]:
    return [MinValueValidator(0.0), MaxValueValidator(1.0)]


class RoutingPolicy(models.Model):
    """The tunable numbers of routing. There is exactly one row (key 'default')."""

    key = models.CharField(max_length=20, default="default", unique=True, editable=False)
    weight_match = models.FloatField(default=0.5, validators=_unit_interval())
    weight_health = models.FloatField(default=0.3, validators=_unit_interval())
    weight_performance = models.FloatField(default=0.2, validators=_unit_interval())
    performance_window = models.PositiveIntegerField(
        default=100,
        validators=[MinValueValidator(1), MaxValueValidator(1000)],
        help_text="What routing learns from counts at most the last N attempts of each backend "
        "and intent, so that a change shows within N answers however busy it is.",
    )
    half_life_seconds = models.FloatField(
        default=40.0,
        validators=[MinValueValidator(1.0), MaxValueValidator(86400.0)],
        help_text="An attempt this old counts half as much as a new one: shorter follows "
        "changes sooner, longer is surer of steady backends.",
    )
    half_life_attempts = models.FloatField(
        default=50.0,
        validators=[MinValueValidator(1.0), MaxValueValidator(1000.0)],
        help_text="An attempt followed by this many newer ones of the same flow and intent "
        "counts half as much: a change in a busy backend shows within a few answers.",
    )
    failure_cost_seconds = models.FloatField(
        default=5.0,
        validators=[MinValueValidator(0.0), MaxValueValidator(600.0)],
        help_text="What a failed attempt costs beyond its own time, in seconds: backends are "
        "ranked by the expected time to an answer with this added per failure. Higher "
        "prefers backends that fail less over faster ones.",
    )
    prior_strength = models.FloatField(
        default=2.0,
        validators=[MinValueValidator(0.1), MaxValueValidator(100.0)],
        help_text="How many attempts the prior is worth (what the backend does for its other "
        "intents and the fleet for this one) before a flow's own attempts speak.",
    )
    exploration = models.FloatField(
        default=0.5,
        validators=_unit_interval(),
        help_text="How boldly routing tries backends it is unsure of. The first backend is "
        "chosen by a draw from what routing believes of each (Thompson sampling), its "
        "spread times this: 1 tries each about as often as it may be the best; 0 always "
        "takes the best estimate, and a backend is measured again only when fallback "
        "reaches it.",
    )
    hedging = models.BooleanField(
        default=False,
        help_text="Hedged requests: when the first backend has not answered within its usual "
        "latency (the time 9 of its answers in 10 take), the next candidate starts too; the "
        "first answer wins and the other is cancelled. Shorter waits on slow questions, at "
        "the price of a second call for them. Streamed answers are not hedged.",
    )
    learn_from_llm = models.BooleanField(
        default=False,
        help_text="Keep the questions the LLM labelled as examples (source: llm) for the "
        "learned classifier; review and drop them under Intent examples.",
    )
    latency_ceiling_ms = models.PositiveIntegerField(
        default=5000,
        validators=[MinValueValidator(1)],
        help_text="An average latency at or above this scores zero.",
    )
    weight_tokens = models.FloatField(
        default=0.0,
        validators=_unit_interval(),
        help_text="Weight of token usage in the score: fewer tokens per answer (over the "
        "performance window, where the backend reports them) score higher. 0: not a factor.",
    )
    token_ceiling = models.PositiveIntegerField(
        default=4000,
        validators=[MinValueValidator(1)],
        help_text="Mean total tokens per answer at or above this score zero on token usage.",
    )
    confidence_threshold = models.FloatField(
        default=0.7,
        validators=_unit_interval(),
        help_text="Below this, a rule-based classification is not trusted.",
    )
    cooldown_failures = models.PositiveIntegerField(
        default=3,
        validators=[MinValueValidator(1)],
        help_text="Consecutive failed health checks before a backend is put in cooldown.",
    )
    cooldown_seconds = models.PositiveIntegerField(default=60, validators=[MinValueValidator(1)])
    flow_cache_ttl_seconds = models.PositiveIntegerField(
        default=120, validators=[MinValueValidator(1)]
    )
    health_cache_ttl_seconds = models.PositiveIntegerField(
        default=90, validators=[MinValueValidator(1)]
    )
    query_budget_seconds = models.FloatField(
        default=30.0,
        validators=[MinValueValidator(0.1), MaxValueValidator(600.0)],
        help_text="The most one query may take, from its arrival to its last attempt: each "
        "attempt gets the smaller of its backend's timeout and what remains, and none starts "
        "once it is spent.",
    )
    answer_cache_ttl_seconds = models.PositiveIntegerField(
        default=3600,
        validators=[MinValueValidator(1)],
        help_text="How long an answer may be served when every backend is down.",
    )
    llm_classification_enabled = models.BooleanField(
        default=True,
        help_text=(
            "Ask the configured LLM (LLM_BASE_URL) when rules are below the confidence "
            "threshold. Without an LLM configured, rules alone decide either way."
        ),
    )
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name = "routing policy"
        verbose_name_plural = "routing policy"
        constraints = [
            models.CheckConstraint(
                condition=models.Q(key="default"), name="routingpolicy_single_row"
            ),
            models.CheckConstraint(
                condition=models.Q(
                    weight_match__gte=0,
                    weight_match__lte=1,
                    weight_health__gte=0,
                    weight_health__lte=1,
                    weight_performance__gte=0,
                    weight_performance__lte=1,
                    weight_tokens__gte=0,
                    weight_tokens__lte=1,
                ),
                name="routingpolicy_weights_in_unit_interval",
            ),
            models.CheckConstraint(
                condition=models.Q(confidence_threshold__gte=0, confidence_threshold__lte=1),
                name="routingpolicy_threshold_in_unit_interval",
            ),
            models.CheckConstraint(
                condition=models.Q(performance_window__gte=1), name="routingpolicy_window_gte_1"
            ),
        ]

    def __str__(self) -> str:
        return "Routing policy"

    def clean(self) -> None:
        super().clean()
        weights = self.weight_match + self.weight_health + self.weight_performance
        if weights + self.weight_tokens <= 0:
            raise ValidationError("At least one scoring weight must be above zero.")

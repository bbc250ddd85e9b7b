"""Intents and their rules, query-type rules, the routing policy, sessions, and what
routing did: one decision per query, one performance record per attempt."""

from __future__ import annotations

import uuid

from django.core.exceptions import ValidationError
from django.core.validators import BaseValidator, MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import F
from django.db.models.functions import MD5

from backends.models import Backend
from chatflows.models import Flow
from flywheel.models import Tenant
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


def _unit_interval() -> list[BaseValidator]:
    return [MinValueValidator(0.0), MaxValueValidator(1.0)]


class RoutingPolicy(models.Model):
    """The tunable numbers of routing. There is exactly one row (key 'default')."""

    key = models.CharField(max_length=20, default="default", unique=True, editable=False)
    weight_match = models.FloatField(default=0.5, validators=_unit_interval())
    weight_health = models.FloatField(default=0.3, validators=_unit_interval())
    weight_performance = models.FloatField(default=0.2, validators=_unit_interval())
    performance_window = models.PositiveIntegerField(
        default=10,
        validators=[MinValueValidator(1), MaxValueValidator(1000)],
        help_text="Performance is scored over the last N records for a backend and intent.",
    )
    performance_max_age_seconds = models.PositiveIntegerField(
        default=60,
        validators=[MinValueValidator(1)],
        help_text="Attempts older than this no longer count: a backend demoted by its "
        "failures is tried again once they age, and measured again.",
    )
    learn_from_llm = models.BooleanField(
        default=False,
        help_text="Keep the questions the LLM labelled as examples (source: llm) for the "
        "learned classifier; review and drop them under Intent examples.",
    )
    exploration_share = models.FloatField(
        default=0.05,
        validators=_unit_interval(),
        help_text="Share of automatically routed questions that try first a healthy backend "
        "routing has no recent measure of (none, or aged out), so that every backend stays "
        "measured and a healed one wins its traffic back. 0: never.",
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


# RECORD_REFERENCE. The records written for every question (a decision, its
# performance records, its turn; the session with its first decision) refer to
# their session, decision, backend and flow without a constraint in the database.
# Django applies on_delete itself (deleting a backend deletes its performance
# records and clears its decisions' and turns' references, as before); the
# writer (routing/batch_sql.py) writes a batch's sessions and decisions in the
# same statement as what refers to them, and refers only to backends and flows
# that exist. Checked by PostgreSQL, these ten references cost half of its CPU
# per question (a trigger each at commit). The tenant's references keep theirs:
# a decision for a tenant that does not exist is refused and set aside.


class Session(models.Model):
    """A conversation: the turns Flywheel keeps so any backend can continue it."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="sessions")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-updated_at"]
        indexes = [models.Index(fields=["tenant", "-updated_at"], name="session_tenant_recent")]

    def __str__(self) -> str:
        return str(self.id)


class Turn(models.Model):
    """One question and its answer within a session."""

    # References without a database constraint (db_constraint=False): see RECORD_REFERENCE.
    session = models.ForeignKey(
        Session, on_delete=models.CASCADE, related_name="turns", db_constraint=False
    )
    question = models.TextField()
    answer = models.TextField(blank=True)
    intent = models.CharField(max_length=50, blank=True)
    backend = models.ForeignKey(
        Backend,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
        db_constraint=False,
    )
    flow = models.ForeignKey(
        Flow,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
        db_constraint=False,
    )
    # The decision that answered this turn (turns stored before the link have none).
    decision = models.OneToOneField(
        "RoutingDecision",
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="turn",
        db_constraint=False,
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at", "id"]
        indexes = [models.Index(fields=["session", "-created_at"], name="turn_session_recent")]

    def __str__(self) -> str:
        return f"{self.session_id}: {self.question[:40]}"


class IntentMethod(models.TextChoices):
    RULES = "rules", "Rules"
    CONTEXT = "context", "Conversation context"
    EXAMPLE = "example", "A question a person labelled"
    MODEL = "model", "Model learned from examples"
    LLM = "llm", "LLM"
    OVERRIDE = "override", "Override"
    DEFAULT = "default", "Default: no step was sure"


class QueryType(models.TextChoices):
    GLOBAL = "GLOBAL", "Global"
    LOCAL = "LOCAL", "Local"
    HYBRID = "HYBRID", "Hybrid"


class ExampleSource(models.TextChoices):
    SHIPPED = "shipped", "Shipped with Flywheel"
    ADMIN = "admin", "Written by an admin"
    CORRECTION = "correction", "A corrected decision"
    LLM = "llm", "Labelled by the LLM"


class _Example(models.Model):
    """A labelled question the learned classifiers learn from (routing.classifier)."""

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
    """A classifier trained on the examples (routing.learned), one version per training;
    every process uses the newest of its kind."""

    kind = models.CharField(max_length=20, choices=ClassifierKind.choices)
    created_at = models.DateTimeField(auto_now_add=True)
    examples = models.PositiveIntegerField(help_text="How many examples it learned from.")
    accuracy = models.FloatField(help_text="Cross-validated accuracy on its examples.")
    labels = models.JSONField(default=list)
    digest = models.CharField(max_length=64, help_text="Of the examples it learned from.")
    artefact = models.JSONField(help_text="The fitted model as numbers (routing.learned).")

    class Meta:
        ordering = ["-id"]
        indexes = [models.Index(fields=["kind", "-id"], name="classifier_kind_newest")]

    def __str__(self) -> str:
        return f"{self.kind} v{self.pk} ({self.examples} examples, {self.accuracy:.1%})"


class RoutingMethod(models.TextChoices):
    AUTO = "auto", "Automatic"
    EXPLICIT = "explicit", "Explicit backend"


class Outcome(models.TextChoices):
    SUCCESS = "success", "Answered by the first choice"
    FALLBACK = "fallback", "Answered after a fallback"
    CACHED = "cached", "Answered from cache"
    FAILED = "failed", "Failed"
    REJECTED = "rejected", "Rejected before routing"
    ABANDONED = "abandoned", "Answered after the client had gone"


# What the client received an answer in (an abandoned answer was ready, but nobody got it).
ANSWERED_OUTCOMES = (Outcome.SUCCESS, Outcome.FALLBACK, Outcome.CACHED)


class RoutingDecision(models.Model):
    """Everything routing knew and did for one query; written exactly once per query."""

    request_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="decisions")
    # Every reference but the tenant's has no database constraint: see RECORD_REFERENCE.
    session = models.ForeignKey(
        Session,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="decisions",
        db_constraint=False,
    )
    question = models.TextField()
    intent = models.CharField(max_length=50, blank=True)
    intent_confidence = models.FloatField(null=True, blank=True)
    intent_method = models.CharField(max_length=10, choices=IntentMethod.choices, blank=True)
    query_type = models.CharField(max_length=10, choices=QueryType.choices, blank=True)
    query_type_confidence = models.FloatField(null=True, blank=True)
    evidence = models.JSONField(
        default=dict,
        blank=True,
        help_text="Why: the intent's matched patterns (or context), the query type's "
        "reasoning and weights.",
    )
    routing_method = models.CharField(
        max_length=10, choices=RoutingMethod.choices, default=RoutingMethod.AUTO
    )
    backend = models.ForeignKey(
        Backend,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="decisions",
        db_constraint=False,
    )
    flow = models.ForeignKey(
        Flow,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="decisions",
        db_constraint=False,
    )
    score = models.FloatField(null=True, blank=True)
    candidates = models.JSONField(
        default=list, blank=True, help_text="Each candidate with its factor scores."
    )
    fallback_chain = models.JSONField(
        default=list, blank=True, help_text="Each attempt, in order, with its outcome."
    )
    outcome = models.CharField(max_length=10, choices=Outcome.choices)
    error_type = models.CharField(max_length=50, blank=True)
    error_message = models.TextField(
        blank=True, default="", help_text="What the caller was told when no answer came."
    )
    corrected_intent = models.CharField(
        max_length=50,
        blank=True,
        default="",
        help_text="The intent an admin said it was (intent keeps what was detected); the "
        "question became a correction example.",
    )
    corrected_at = models.DateTimeField(null=True, blank=True)
    classify_ms = models.FloatField(default=0)
    route_ms = models.FloatField(default=0)
    execute_ms = models.FloatField(default=0)
    total_ms = models.FloatField(default=0)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        # The analytics app created this table, and owned the model until routing took
        # it over (routing/migrations/0004): the table, its indexes and constraints
        # keep their names.
        db_table = "analytics_routingdecision"
        ordering = ["-created_at"]
        indexes = [
            models.Index(fields=["tenant", "-created_at"], name="decision_tenant_recent"),
            # The few corrected decisions, found without reading the others.
            models.Index(
                fields=["created_at"],
                condition=models.Q(corrected_at__isnull=False),
                name="decision_corrected",
            ),
        ]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(outcome__in=Outcome.values), name="decision_outcome_valid"
            ),
            models.CheckConstraint(
                condition=models.Q(
                    classify_ms__gte=0, route_ms__gte=0, execute_ms__gte=0, total_ms__gte=0
                ),
                name="decision_timings_non_negative",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.request_id} ({self.outcome})"


class PerformanceRecord(models.Model):
    """One attempt to run a flow, failed ones included; feeds the performance score."""

    # References without a database constraint (db_constraint=False): see RECORD_REFERENCE.
    backend = models.ForeignKey(
        Backend, on_delete=models.CASCADE, related_name="performance", db_constraint=False
    )
    flow = models.ForeignKey(
        Flow,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
        db_constraint=False,
    )
    decision = models.ForeignKey(
        RoutingDecision,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="attempts",
        db_constraint=False,
    )
    intent = models.CharField(max_length=50)
    latency_ms = models.FloatField()
    success = models.BooleanField()
    error_type = models.CharField(max_length=50, blank=True)
    # What the backend reported using, where it did (Flowise and Langflow report tokens
    # for flows with LLM nodes, and no cost); null: not reported.
    prompt_tokens = models.PositiveIntegerField(null=True, blank=True)
    completion_tokens = models.PositiveIntegerField(null=True, blank=True)
    total_tokens = models.PositiveIntegerField(null=True, blank=True)
    cost = models.FloatField(null=True, blank=True, help_text="As the backend reported it.")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        db_table = "analytics_performancerecord"  # as RoutingDecision's, see there
        ordering = ["-created_at"]
        indexes = [
            # The hot read: the last N records for a backend + intent.
            models.Index(
                fields=["backend", "intent", "-created_at"], name="perf_backend_intent_recent"
            ),
        ]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(latency_ms__gte=0), name="perf_latency_non_negative"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.backend.name}/{self.intent}: {'ok' if self.success else self.error_type}"

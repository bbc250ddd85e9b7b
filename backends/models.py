"""Backends (Flowise and Langflow servers) and what Flywheel knows of their health."""

from __future__ import annotations

from collections.abc import Collection

from django.core.validators import MaxValueValidator, MinValueValidator, RegexValidator
from django.db import models
from django.db.models.functions import Lower
from django.utils import timezone

from backends.adapters import kind_choices, kinds
from backends.addresses import validate_backend_url
from flywheel.models import Tenant

MAX_NAME = 100
MAX_URL = 500
MAX_API_KEY = 500
MIN_TIMEOUT_SECONDS = 0.1
MAX_TIMEOUT_SECONDS = 600.0
DEFAULT_TIMEOUT_SECONDS = 60.0
MAX_WEIGHT = 100.0
DEFAULT_WEIGHT = 1.0
# A key travels in an HTTP header: a CR or LF in it would split the request. Spelled
# for Python's, ECMA's and pydantic's regexes alike (backends/contract.py reads it too).
API_KEY_CHARACTERS = r"\x20-\x7e"
validate_api_key = RegexValidator(
    rf"\A[{API_KEY_CHARACTERS}]*\Z",  # \Z: a trailing line break must not slip past $
    "An API key may hold only printable ASCII characters (no line breaks or control characters).",
    code="api_key_characters",
)


class Backend(models.Model):
    """One Flowise or Langflow server that Flywheel routes questions to.

    ``api_key`` is write-only: it is sent to the backend and never rendered
    back by any admin page, API response, log line or MCP result.
    A backend with an owning tenant serves only that tenant; one without
    serves every tenant. Names are unique per owner, never across owners, so
    no tenant learns another's names, and the owner never changes.
    Unless ``allow_private_addresses`` (set by staff only), the backend may
    reach only public addresses (backends/addresses.py).
    """

    name = models.CharField(max_length=MAX_NAME)
    # The kinds are the adapter registry's (backends/adapters/__init__.py), read when
    # a form or a validation asks, so a kind added there needs no change here.
    kind = models.CharField(max_length=20, choices=kind_choices)
    base_url = models.URLField(
        max_length=MAX_URL,
        validators=[validate_backend_url],
        help_text="e.g. http://127.0.0.1:3000 (http or https, no user name or password)",
    )
    api_key = models.CharField(max_length=MAX_API_KEY, blank=True, validators=[validate_api_key])
    enabled = models.BooleanField(default=True)
    timeout_seconds = models.FloatField(
        default=DEFAULT_TIMEOUT_SECONDS,
        validators=[MinValueValidator(MIN_TIMEOUT_SECONDS), MaxValueValidator(MAX_TIMEOUT_SECONDS)],
        help_text="Read timeout for a flow run, in seconds (0.1 to 600).",
    )
    weight = models.FloatField(
        default=DEFAULT_WEIGHT,
        validators=[MinValueValidator(0.0), MaxValueValidator(MAX_WEIGHT)],
        help_text="Relative preference among equally scored backends (0 to 100).",
    )
    allow_private_addresses = models.BooleanField(
        default=False,
        help_text=(
            "May reach loopback, private and other internal addresses. Only staff set this; "
            "a tenant that points the backend elsewhere clears it."
        ),
    )
    tenant = models.ForeignKey(
        Tenant,
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="backends",
        help_text="Leave empty to share this backend with every tenant.",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]
        constraints = [
            models.UniqueConstraint(
                Lower("name"),
                "tenant",
                condition=models.Q(tenant__isnull=False),
                name="backend_name_unique_per_tenant_ci",
                violation_error_message="You already have a backend with this name.",
                violation_error_code="duplicate_name",
            ),
            models.UniqueConstraint(
                Lower("name"),
                condition=models.Q(tenant__isnull=True),
                name="backend_name_unique_shared_ci",
                violation_error_message="A shared backend with this name already exists.",
                violation_error_code="duplicate_name",
            ),
            # The database holds to the registered kinds too: a kind added to the
            # registry changes this, and makemigrations writes the migration for it.
            models.CheckConstraint(
                condition=models.Q(kind__in=list(kinds())), name="backend_kind_valid"
            ),
            models.CheckConstraint(
                condition=models.Q(timeout_seconds__gt=0), name="backend_timeout_positive"
            ),
            models.CheckConstraint(condition=models.Q(weight__gte=0), name="backend_weight_gte_0"),
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.get_kind_display()})"

    def validate_constraints(self, exclude: Collection[str] | None = None) -> None:
        # The kind check's list was read from the registry when this module loaded; the
        # field's choices read it each time and refuse the same kinds, so they speak for
        # it here (the database still holds it).
        super().validate_constraints(exclude={*(exclude or ()), "kind"})

    @property
    def has_api_key(self) -> bool:
        return bool(self.api_key)


class BackendHealth(models.Model):
    """The current health of a backend: one row per backend, updated in place."""

    backend = models.OneToOneField(
        Backend, on_delete=models.CASCADE, primary_key=True, related_name="health"
    )
    healthy = models.BooleanField(default=False)
    last_checked_at = models.DateTimeField(null=True, blank=True)
    latency_ms = models.FloatField(null=True, blank=True)
    last_error = models.TextField(blank=True)
    consecutive_failures = models.PositiveIntegerField(default=0)
    cooldown_until = models.DateTimeField(
        null=True, blank=True, help_text="Not a routing candidate until this time."
    )
    needs_trial = models.BooleanField(
        default=False,
        help_text="Its traffic failed (the breaker opened): after the cooldown, one query "
        "tries it before it takes its whole share again.",
    )

    class Meta:
        verbose_name = "backend health"
        verbose_name_plural = "backend health"

    def __str__(self) -> str:
        return f"{self.backend.name}: {'healthy' if self.healthy else 'unhealthy'}"

    @property
    def in_cooldown(self) -> bool:
        return self.cooldown_until is not None and self.cooldown_until > timezone.now()


class HealthCheck(models.Model):
    """One probe of a backend, kept as history."""

    backend = models.ForeignKey(Backend, on_delete=models.CASCADE, related_name="health_checks")
    checked_at = models.DateTimeField(auto_now_add=True)
    ok = models.BooleanField()
    latency_ms = models.FloatField(null=True, blank=True)
    error = models.TextField(blank=True)

    class Meta:
        ordering = ["-checked_at"]
        indexes = [
            models.Index(fields=["backend", "-checked_at"], name="healthcheck_backend_time"),
        ]

    def __str__(self) -> str:
        state = "ok" if self.ok else "failed"
        return f"{self.backend.name} at {self.checked_at:%Y-%m-%d %H:%M:%S}: {state}"

"""Tenants and the API keys that act for them."""

from __future__ import annotations

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models
from django.db.models.functions import Lower

from flywheel.env import as_rate


def validate_rate(value: str) -> None:
    """A rate as FLYWHEEL_RATE_LIMIT takes it: ``600/minute``, ``10/second``, ``off``."""
    try:
        as_rate(value)
    except ValueError as err:
        raise ValidationError(
            'Write a rate such as "600/minute", "10/second" or "5000/hour", or "off".'
        ) from err


class Tenant(models.Model):
    """An organisation whose keys, sessions, decisions and backends are kept apart."""

    name = models.CharField(max_length=100)
    slug = models.SlugField(max_length=50, unique=True)
    is_active = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]
        constraints = [
            models.UniqueConstraint(
                Lower("name"),
                name="tenant_name_unique_ci",
                violation_error_message="A tenant with this name already exists.",
            ),
        ]

    def __str__(self) -> str:
        return self.name


class ApiKeyQuerySet(models.QuerySet["ApiKey"]):
    def active(self) -> ApiKeyQuerySet:
        return self.filter(revoked_at__isnull=True, tenant__is_active=True)


class ApiKey(models.Model):
    """A bearer key for the REST API and MCP.

    Only a SHA-256 digest of the key is stored: the key itself is shown once,
    when it is created. Keys carry 256 bits of randomness, so a fast digest is
    enough (no password-style stretching is needed). ``prefix`` is the
    non-secret head of the key, kept so that people can tell keys apart.
    """

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="api_keys")
    name = models.CharField(max_length=100)
    prefix = models.CharField(max_length=16, unique=True, editable=False)
    hashed_key = models.CharField(max_length=64, unique=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True, editable=False)
    revoked_at = models.DateTimeField(null=True, blank=True, editable=False)
    rate_limit = models.CharField(
        max_length=32,
        blank=True,
        default="",
        validators=[validate_rate],
        help_text='Requests this key may make, e.g. "600/minute" (per second, minute, hour '
        'or day), or "off" for no limit. Blank: the server\'s FLYWHEEL_RATE_LIMIT.',
    )

    objects = ApiKeyQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at"]
        verbose_name = "API key"
        constraints = [
            models.CheckConstraint(
                condition=models.Q(hashed_key__regex=r"^[0-9a-f]{64}$"),
                name="apikey_hashed_key_is_sha256_hex",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…)"

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None


class Membership(models.Model):
    """A person's account acting for a tenant on the web pages (chat, analytics).

    API keys act for their tenant; a logged-in user acts for the tenant of their
    membership. Staff with the permission to view routing decisions read every
    tenant's pages whether or not they have one.
    """

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="flywheel_membership"
    )
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="members")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["tenant__name", "user__username"]

    def __str__(self) -> str:
        return f"{self.user} → {self.tenant}"

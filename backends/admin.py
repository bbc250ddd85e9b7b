"""Admin for backends. A backend's API key is write-only: never rendered back.

Staff are trusted: a backend saved here may reach private addresses unless
the box is cleared. Its owner is set once, when it is created: nothing here
moves a backend (or its key) from one owner to another.

Discovering a backend's flows is chatflows' business: chatflows/admin.py
registers a subclass of BackendAdmin that adds that action.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.db import transaction
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils import timezone
from django_celery_beat.models import ClockedSchedule, SolarSchedule

from backends.addresses import url_problem
from backends.models import Backend, BackendHealth, HealthCheck
from backends.services import backend_onboard, backends_health_check_now, onboarding_lines
from flywheel.admin_base import ReadOnlyAdmin, shortened
from flywheel.errors import ApplicationError, RateLimitError


class BackendForm(forms.ModelForm):
    # Backends usually sit on a private network without TLS: no scheme means http.
    base_url = forms.URLField(
        max_length=500, assume_scheme="http", help_text="e.g. http://127.0.0.1:3000"
    )
    api_key = forms.CharField(
        required=False,
        strip=True,
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "new-password"}),
        help_text="Write-only. Leave blank to keep the current key.",
    )
    clear_api_key = forms.BooleanField(required=False, label="Remove the stored API key")

    class Meta:
        model = Backend
        fields = [
            "name",
            "kind",
            "base_url",
            "api_key",
            "clear_api_key",
            "enabled",
            "timeout_seconds",
            "weight",
            "allow_private_addresses",
            "tenant",
        ]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        field = self.fields.get("allow_private_addresses")
        if field is not None and self.instance.pk is None:
            field.initial = True  # staff registering a server are trusted, as commands are

    def clean_api_key(self) -> str:
        # A blank field means "unchanged": the stored key is never sent to the page.
        new_key = self.cleaned_data.get("api_key") or ""
        return new_key or (self.instance.api_key if self.instance.pk else "")

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        if cleaned.get("clear_api_key"):
            cleaned["api_key"] = ""
        url = cleaned.get("base_url")
        moved = self.instance.pk is None or url != self.instance.base_url
        if url and moved and not cleaned.get("allow_private_addresses"):
            problem = url_problem(url)
            if problem:
                self.add_error("base_url", problem)
        return cleaned


HEALTH_FIELDS = (
    "healthy",
    "last_checked_at",
    "latency_ms",
    "consecutive_failures",
    "cooldown_until",
    "last_error",
)


class BackendHealthInline(admin.StackedInline):
    model = BackendHealth
    fields = HEALTH_FIELDS
    readonly_fields = HEALTH_FIELDS
    can_delete = False

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


# Beat runs on intervals (backends/schedules.py): clocked and solar schedules are unused.
for unused in (ClockedSchedule, SolarSchedule):
    if admin.site.is_registered(unused):
        admin.site.unregister(unused)


@admin.register(Backend)
class BackendAdmin(admin.ModelAdmin):
    form = BackendForm
    list_display = [
        "name",
        "kind",
        "address",
        "enabled",
        "is_healthy",
        "latency",
        "cooldown",
        "last_error",
        "api_key_state",
        "owner",
    ]
    list_filter = ["kind", "enabled", "tenant", "allow_private_addresses", "health__healthy"]
    search_fields = ["name", "base_url"]
    list_select_related = ["health", "tenant"]
    inlines = [BackendHealthInline]
    actions = ["check_health_now"]

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        # The owner is chosen once: changing it would hand the backend, and its key, over.
        return ["tenant"] if obj is not None else []

    def save_model(self, request: HttpRequest, obj: Backend, form: Any, change: bool) -> None:
        super().save_model(request, obj, form, change)
        if not change:  # a new backend is probed and discovered once it is committed

            def onboard() -> None:
                lines = onboarding_lines(backend_onboard(backend=obj), backend=obj)
                level = (
                    messages.SUCCESS
                    if lines[0].startswith("Health: answering")
                    else messages.WARNING
                )
                self.message_user(request, f"{obj.name}: {' '.join(lines)}", level)

            transaction.on_commit(onboard)

    def _report_error(self, request: HttpRequest, backend: Backend, err: ApplicationError) -> None:
        level = messages.WARNING if isinstance(err, RateLimitError) else messages.ERROR
        self.message_user(request, f"{backend.name}: {err.message}", level)

    @admin.action(description="Check health of selected backends now")
    def check_health_now(self, request: HttpRequest, queryset: QuerySet[Backend]) -> None:
        backends = list(queryset)
        for backend, outcome in zip(
            backends, backends_health_check_now(backends=backends), strict=True
        ):
            if isinstance(outcome, ApplicationError):
                self._report_error(request, backend, outcome)
            else:
                level = messages.SUCCESS if outcome.ok else messages.WARNING
                state = "healthy" if outcome.ok else f"unhealthy: {outcome.error}"
                self.message_user(request, f"{outcome.backend}: {state}", level)

    @admin.display(description="Base URL", ordering="base_url")
    def address(self, obj: Backend) -> str:
        return shortened(obj.base_url, 32)

    @admin.display(description="Latency", ordering="health__latency_ms")
    def latency(self, obj: Backend) -> str:
        health = getattr(obj, "health", None)
        if health is None or health.latency_ms is None:
            return "-"
        return f"{health.latency_ms:.0f} ms"

    @admin.display(description="Cooldown", ordering="health__cooldown_until")
    def cooldown(self, obj: Backend) -> str:
        health = getattr(obj, "health", None)
        until = health.cooldown_until if health is not None else None
        if until is None or until <= timezone.now():
            return "-"
        return timezone.localtime(until).strftime("%H:%M:%S")

    @admin.display(description="Last error")
    def last_error(self, obj: Backend) -> str:
        health = getattr(obj, "health", None)
        return shortened(health.last_error, 40) if health is not None and health.last_error else "-"

    @admin.display(description="Tenant", ordering="tenant__name")
    def owner(self, obj: Backend) -> str:
        return shortened(obj.tenant.name, 24) if obj.tenant else "shared"

    @admin.display(description="Key")
    def api_key_state(self, obj: Backend) -> str:
        return "set (hidden)" if obj.has_api_key else "not set"

    @admin.display(description="Healthy", boolean=True)
    def is_healthy(self, obj: Backend) -> bool | None:
        health = getattr(obj, "health", None)
        return None if health is None else health.healthy


@admin.register(BackendHealth)
class BackendHealthAdmin(ReadOnlyAdmin):
    list_display = [
        "backend",
        "healthy",
        "last_checked_at",
        "latency_ms",
        "consecutive_failures",
        "cooldown_until",
    ]
    list_filter = ["healthy", "backend__kind"]
    search_fields = ["backend__name", "last_error"]
    list_select_related = ["backend"]


@admin.register(HealthCheck)
class HealthCheckAdmin(ReadOnlyAdmin):
    list_display = ["backend", "checked_at", "ok", "latency_ms", "error"]
    list_filter = ["ok", "backend", ("checked_at", admin.DateFieldListFilter)]
    search_fields = ["backend__name", "error"]
    list_select_related = ["backend"]
    date_hierarchy = "checked_at"

"""Admin for tenants and API keys. Keys are created by the service and shown once,
on the page that answers the form: never in a message, which travels in a cookie."""

from __future__ import annotations

import weakref
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse

from flywheel.errors import ValidationError
from flywheel.models import ApiKey, Membership, Tenant
from flywheel.services import api_key_create, api_key_revoke, api_key_set_rate_limit

READONLY_KEY_FIELDS = ("tenant", "name", "prefix", "created_at", "last_used_at", "revoked_at")
CREATED_TEMPLATE = "admin/flywheel/apikey/created.html"


class ApiKeyInline(admin.TabularInline):
    model = ApiKey
    fields = (*READONLY_KEY_FIELDS[1:], "rate_limit")
    readonly_fields = fields
    extra = 0
    can_delete = False
    show_change_link = True

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(Tenant)
class TenantAdmin(admin.ModelAdmin):
    list_display = ["name", "slug", "is_active", "created_at"]
    list_filter = ["is_active"]
    search_fields = ["name", "slug"]
    prepopulated_fields = {"slug": ["name"]}
    inlines = [ApiKeyInline]


class ApiKeyCreateForm(forms.ModelForm):
    class Meta:
        model = ApiKey
        fields = ["tenant", "name", "rate_limit"]


@admin.register(ApiKey)
class ApiKeyAdmin(admin.ModelAdmin):
    list_display = [
        "name",
        "tenant",
        "prefix",
        "rate_limit",
        "created_at",
        "last_used_at",
        "revoked_at",
    ]
    list_filter = ["tenant", ("revoked_at", admin.EmptyFieldListFilter)]
    search_fields = ["name", "prefix", "tenant__name"]
    list_select_related = ["tenant"]
    actions = ["revoke"]
    # hashed_key is never shown: it is not the key, but nothing is gained by showing it.
    readonly_fields = READONLY_KEY_FIELDS

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # A new raw key, from save_model to response_add of the same request.
        self._raw_keys: weakref.WeakKeyDictionary[HttpRequest, str] = weakref.WeakKeyDictionary()

    def get_form(self, request: HttpRequest, obj: Any = None, change: bool = False, **kwargs: Any):
        if obj is None:
            kwargs["form"] = ApiKeyCreateForm
        return super().get_form(request, obj, change, **kwargs)

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> tuple[str, ...]:
        return () if obj is None else READONLY_KEY_FIELDS

    def get_fields(self, request: HttpRequest, obj: Any = None) -> tuple[str, ...]:
        if obj is None:
            return ("tenant", "name", "rate_limit")
        return (*READONLY_KEY_FIELDS, "rate_limit")  # only the limit changes once it exists

    def save_model(self, request: HttpRequest, obj: ApiKey, form: Any, change: bool) -> None:
        if change:
            api_key_set_rate_limit(api_key=obj, rate_limit=obj.rate_limit)
            return
        try:
            api_key, raw_key = api_key_create(
                tenant=obj.tenant, name=obj.name, rate_limit=obj.rate_limit
            )
        except ValidationError as err:
            messages.error(request, err.message)
            raise
        obj.pk = api_key.pk
        obj.prefix, obj.hashed_key, obj.created_at, obj.rate_limit = (
            api_key.prefix,
            api_key.hashed_key,
            api_key.created_at,
            api_key.rate_limit,
        )
        self._raw_keys[request] = raw_key

    def response_add(
        self, request: HttpRequest, obj: ApiKey, post_url_continue: str | None = None
    ) -> HttpResponse:
        """The new key, shown once on this page (the admin never caches its pages)."""
        raw_key = self._raw_keys.pop(request, None)
        if raw_key is None:  # not created by save_model: nothing secret to show
            return super().response_add(request, obj, post_url_continue)
        context = {
            **self.admin_site.each_context(request),
            "opts": self.opts,
            "title": "API key created",
            "api_key": obj,
            "raw_key": raw_key,
        }
        return TemplateResponse(request, CREATED_TEMPLATE, context)

    @admin.action(description="Revoke selected API keys")
    def revoke(self, request: HttpRequest, queryset: QuerySet[ApiKey]) -> None:
        for api_key in queryset:
            api_key_revoke(api_key=api_key)
        self.message_user(request, f"Revoked {queryset.count()} key(s).", messages.SUCCESS)


@admin.register(Membership)
class MembershipAdmin(admin.ModelAdmin):
    """Which tenant a person acts for on the chat and analytics pages."""

    list_display = ["user", "tenant", "created_at"]
    list_filter = ["tenant"]
    search_fields = ["user__username", "tenant__name", "tenant__slug"]
    autocomplete_fields = ["user", "tenant"]
    list_select_related = ["user", "tenant"]

"""Admin for tenants and API keys. Keys are created by the service and shown once."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest

from flywheel.errors import ValidationError
from flywheel.models import ApiKey, Tenant
from flywheel.services import api_key_create, api_key_revoke

READONLY_KEY_FIELDS = ("tenant", "name", "prefix", "created_at", "last_used_at", "revoked_at")


class ApiKeyInline(admin.TabularInline):
    model = ApiKey
    fields = READONLY_KEY_FIELDS[1:]
    readonly_fields = READONLY_KEY_FIELDS[1:]
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
        fields = ["tenant", "name"]


@admin.register(ApiKey)
class ApiKeyAdmin(admin.ModelAdmin):
    list_display = ["name", "tenant", "prefix", "created_at", "last_used_at", "revoked_at"]
    list_filter = ["tenant", ("revoked_at", admin.EmptyFieldListFilter)]
    search_fields = ["name", "prefix", "tenant__name"]
    list_select_related = ["tenant"]
    actions = ["revoke"]
    # hashed_key is never shown: it is not the key, but nothing is gained by showing it.
    readonly_fields = READONLY_KEY_FIELDS

    def get_form(self, request: HttpRequest, obj: Any = None, change: bool = False, **kwargs: Any):
        if obj is None:
            kwargs["form"] = ApiKeyCreateForm
        return super().get_form(request, obj, change, **kwargs)

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> tuple[str, ...]:
        return () if obj is None else READONLY_KEY_FIELDS

    def get_fields(self, request: HttpRequest, obj: Any = None) -> tuple[str, ...]:
        return ("tenant", "name") if obj is None else READONLY_KEY_FIELDS

    def save_model(self, request: HttpRequest, obj: ApiKey, form: Any, change: bool) -> None:
        if change:
            return  # every field is read-only once the key exists
        try:
            api_key, raw_key = api_key_create(tenant=obj.tenant, name=obj.name)
        except ValidationError as err:
            messages.error(request, err.message)
            raise
        obj.pk = api_key.pk
        obj.prefix, obj.hashed_key, obj.created_at = (
            api_key.prefix,
            api_key.hashed_key,
            api_key.created_at,
        )
        messages.warning(request, f"Copy this key now; it will not be shown again: {raw_key}")

    @admin.action(description="Revoke selected API keys")
    def revoke(self, request: HttpRequest, queryset: QuerySet[ApiKey]) -> None:
        for api_key in queryset:
            api_key_revoke(api_key=api_key)
        self.message_user(request, f"Revoked {queryset.count()} key(s).", messages.SUCCESS)

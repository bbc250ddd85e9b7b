"""Admin for discovered flows. Keywords edited here survive later discoveries."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from chatflows.models import Flow


@admin.register(Flow)
class FlowAdmin(admin.ModelAdmin):
    list_display = [
        "name",
        "backend",
        "flow_type",
        "deployed",
        "scope",
        "is_generic",
        "keywords_edited",
        "last_seen_at",
        "removed_at",
    ]
    list_filter = [
        "backend",
        "flow_type",
        "deployed",
        "scope",
        "is_generic",
        "keywords_edited",
        ("removed_at", admin.EmptyFieldListFilter),
    ]
    search_fields = ["name", "external_id", "description", "endpoint_name"]
    list_select_related = ["backend"]
    readonly_fields = ["backend", "external_id", "first_seen_at", "last_seen_at", "removed_at"]
    fields = [
        "backend",
        "external_id",
        "name",
        "flow_type",
        "deployed",
        "description",
        "endpoint_name",
        "intent_keywords",
        "keywords_edited",
        "scope",
        "is_generic",
        "first_seen_at",
        "last_seen_at",
        "removed_at",
    ]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # flows come from discovery

    def save_model(self, request: HttpRequest, obj: Flow, form: Any, change: bool) -> None:
        if "intent_keywords" in form.changed_data:
            obj.keywords_edited = True
        super().save_model(request, obj, form, change)

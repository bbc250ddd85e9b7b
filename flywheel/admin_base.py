"""Admin building blocks shared by every app."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest
from django.utils.html import format_html
from django.utils.safestring import SafeString


def shortened(text: str, limit: int = 60) -> SafeString | str:
    """``text`` cut to ``limit`` characters for a list column, whole in its tooltip: a
    long regex or question must not push the other columns off the screen."""
    if len(text) <= limit:
        return text
    return format_html('<span title="{}">{}…</span>', text, text[: limit - 1])


class ReadOnlyAdmin(admin.ModelAdmin):
    """For history written by the system: viewable, never edited by hand."""

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

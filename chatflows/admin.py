"""Admin for discovered flows, and the backends' "discover flows now" action.

Keywords edited here survive later discoveries.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest

from backends.admin import BackendAdmin
from backends.models import Backend
from chatflows.models import Flow
from chatflows.services import flows_discover_now
from flywheel.errors import ApplicationError


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


class BackendDiscoveryAdmin(BackendAdmin):
    """The backends admin of backends/admin.py, plus discovering their flows now.

    Discovery belongs to chatflows, which builds on backends: backends cannot
    offer the action without importing upwards. Django keeps one ModelAdmin per
    model, so this layer, which knows both, registers a subclass in the
    original's place (importing backends.admin above guarantees the original is
    registered first, whatever the order of INSTALLED_APPS).
    """

    actions = [*(BackendAdmin.actions or ()), "discover_flows_now"]

    @admin.action(description="Discover flows of selected backends now")
    def discover_flows_now(self, request: HttpRequest, queryset: QuerySet[Backend]) -> None:
        backends = list(queryset)
        for backend, report in zip(backends, flows_discover_now(backends=backends), strict=True):
            if isinstance(report, ApplicationError):
                self._report_error(request, backend, report)
            else:
                self.message_user(
                    request,
                    f"{report.backend}: {report.added} added, {report.updated} updated, "
                    f"{report.removed} removed",
                    messages.SUCCESS,
                )


admin.site.unregister(Backend)
admin.site.register(Backend, BackendDiscoveryAdmin)

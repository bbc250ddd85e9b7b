"""Admin for discovered flows, and the backends' "discover flows now" action.

What a flow is on its backend (name, type, deployment, description) is
shown, never edited here: it changes on the backend, through the lifecycle
actions below, and the row follows. Flywheel's own fields (intent keywords,
scope, generic) are edited here; keywords edited here survive discoveries.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.db.models import Count, Q, QuerySet
from django.http import HttpRequest

from backends.adapters import run_sync
from backends.admin import BackendAdmin
from backends.models import Backend
from chatflows.lifecycle import chatflow_delete, chatflow_deploy
from chatflows.models import Flow
from chatflows.rows import SYNCED_FIELDS
from chatflows.services import flow_routing_set, flows_discover_now, keyword_list
from flywheel.errors import ApplicationError


class KeywordsField(forms.Field):
    """A flow's intent keywords as one line, "code-review, summarize": not raw JSON."""

    def prepare_value(self, value: Any) -> Any:
        if isinstance(value, list):
            return ", ".join(str(v) for v in value)
        return value

    widget = forms.TextInput

    def to_python(self, value: Any) -> list[str]:
        text = value if isinstance(value, str) else ", ".join(value or [])
        if len(text) > 2000:
            raise forms.ValidationError("At most 2000 characters.")
        return keyword_list(text.split(","))

    def has_changed(self, initial: Any, data: Any) -> bool:
        return self.to_python(self.prepare_value(initial)) != self.to_python(data)


class FlowForm(forms.ModelForm):
    intent_keywords = KeywordsField(
        required=False,
        widget=forms.TextInput(attrs={"size": 80}),
        help_text="The intents this flow serves (their slugs, such as code-review), "
        "separated by commas. Edited here, they survive discoveries.",
    )

    class Meta:
        model = Flow
        fields = ["intent_keywords", "keywords_edited", "scope", "scope_edited", "is_generic"]


@admin.register(Flow)
class FlowAdmin(admin.ModelAdmin):
    form = FlowForm
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
    readonly_fields = [
        "backend",
        "external_id",
        *SYNCED_FIELDS,
        "first_seen_at",
        "last_seen_at",
        "removed_at",
    ]
    actions = ["deploy_on_backend", "undeploy_on_backend", "delete_on_backend"]
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
        "scope_edited",
        "is_generic",
        "first_seen_at",
        "last_seen_at",
        "removed_at",
    ]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # flows come from discovery

    def save_model(self, request: HttpRequest, obj: Flow, form: Any, change: bool) -> None:
        keywords = None
        if "intent_keywords" in form.changed_data:  # the service sees them change
            keywords, obj.intent_keywords = obj.intent_keywords, form.initial["intent_keywords"]
        scope = None
        if "scope" in form.changed_data:  # set by hand: kept by later discoveries
            scope, obj.scope = obj.scope, form.initial["scope"]
        flow_routing_set(flow=obj, intent_keywords=keywords, scope=scope)

    def _on_backend(
        self,
        request: HttpRequest,
        flows: QuerySet[Flow],
        operation: Callable[..., Awaitable[dict[str, Any]]],
        done: str,
        **arguments: Any,
    ) -> None:
        """Run one lifecycle operation per flow, as staff (tenant None), reporting each."""
        for flow in flows.select_related("backend"):
            try:
                run_sync(
                    operation,
                    tenant=None,
                    chatflow_id=flow.external_id,
                    backend=str(flow.backend_id),
                    **arguments,
                )
            except ApplicationError as err:
                self.message_user(request, f"{flow}: {err.message}", messages.ERROR)
            else:
                self.message_user(request, f"{flow}: {done}", messages.SUCCESS)

    @admin.action(description="Deploy selected flows on their backends")
    def deploy_on_backend(self, request: HttpRequest, queryset: QuerySet[Flow]) -> None:
        self._on_backend(request, queryset, chatflow_deploy, "deployed", deployed=True)

    @admin.action(description="Undeploy selected flows on their backends")
    def undeploy_on_backend(self, request: HttpRequest, queryset: QuerySet[Flow]) -> None:
        self._on_backend(request, queryset, chatflow_deploy, "undeployed", deployed=False)

    @admin.action(description="Delete selected flows from their backends")
    def delete_on_backend(self, request: HttpRequest, queryset: QuerySet[Flow]) -> None:
        self._on_backend(request, queryset, chatflow_delete, "deleted from its backend")


class BackendDiscoveryAdmin(BackendAdmin):
    """The backends admin of backends/admin.py, plus discovering their flows now.

    Discovery belongs to chatflows, which builds on backends: backends cannot
    offer the action without importing upwards. Django keeps one ModelAdmin per
    model, so this layer, which knows both, registers a subclass in the
    original's place (importing backends.admin above guarantees the original is
    registered first, whatever the order of INSTALLED_APPS).
    """

    actions = [*(BackendAdmin.actions or ()), "discover_flows_now"]
    list_display = [*BackendAdmin.list_display[:4], "flows", *BackendAdmin.list_display[4:]]

    def get_queryset(self, request: HttpRequest) -> QuerySet[Backend]:
        active = Q(flows__removed_at__isnull=True)
        return super().get_queryset(request).annotate(flow_count=Count("flows", filter=active))

    @admin.display(description="Flows", ordering="flow_count")
    def flows(self, obj: Backend) -> int:
        return int(getattr(obj, "flow_count", 0))

    @admin.action(description="Discover flows of selected backends now")
    def discover_flows_now(self, request: HttpRequest, queryset: QuerySet[Backend]) -> None:
        backends = list(queryset)
        for backend, report in zip(backends, flows_discover_now(backends=backends), strict=True):
            if isinstance(report, ApplicationError):
                self._report_error(request, backend, report)
            else:
                self.message_user(
                    request,
                    f"{report.backend}: {report.counts}",
                    messages.SUCCESS,
                )


admin.site.unregister(Backend)
admin.site.register(Backend, BackendDiscoveryAdmin)

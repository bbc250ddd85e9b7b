"""Admin for intents, rule patterns, the routing policy and sessions."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.db.models import Count, OuterRef, QuerySet, Subquery
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse

from flywheel.admin_base import ReadOnlyAdmin, shortened
from routing.answering.classify import classification_explain
from routing.models import (
    ClassifierModel,
    Intent,
    IntentExample,
    IntentPattern,
    QueryTypeExample,
    RoutingPolicy,
    ScopePattern,
    Session,
    Split,
    SplitArm,
    Turn,
)
from routing.selection.state import forget, routing_state


class IntentPatternInline(admin.TabularInline):
    model = IntentPattern
    fields = ["kind", "pattern", "weight", "enabled"]
    extra = 1


class TryForm(forms.Form):
    question = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 3, "cols": 80}), max_length=10000
    )


@admin.register(Intent)
class IntentAdmin(admin.ModelAdmin):
    list_display = ["slug", "name", "enabled", "priority", "pattern_count", "example_count"]
    list_filter = ["enabled"]
    search_fields = ["slug", "name", "description", "patterns__pattern"]
    prepopulated_fields = {"slug": ["name"]}
    inlines = [IntentPatternInline]
    change_list_template = "admin/routing/intent/change_list.html"

    @admin.display(description="Patterns")
    def pattern_count(self, obj: Intent) -> int:
        return obj.patterns.count()

    @admin.display(description="Examples")
    def example_count(self, obj: Intent) -> int:
        return obj.examples.count()

    def get_urls(self) -> list[URLPattern]:
        attempt = path("try/", self.admin_site.admin_view(self.try_view), name="routing_intent_try")
        return [attempt, *super().get_urls()]

    def try_view(self, request: HttpRequest) -> HttpResponse:
        """Try a question: what each step of the cascade says, and why."""
        if not request.user.has_perm("routing.view_intent"):
            raise PermissionDenied
        form = TryForm(request.POST or None)
        explained = None
        if request.method == "POST" and form.is_valid():
            forget()  # the rules and models as they are now, edits included
            explained = classification_explain(routing_state(), form.cleaned_data["question"])
        context = {
            **self.admin_site.each_context(request),
            "title": "Try a question",
            "form": form,
            "explained": explained,
            "opts": self.model._meta,
        }
        return TemplateResponse(request, "admin/routing/intent/try.html", context)


@admin.register(IntentPattern)
class IntentPatternAdmin(admin.ModelAdmin):
    list_display = ["short_pattern", "intent", "kind", "weight", "enabled"]
    list_filter = ["intent", "kind", "enabled"]
    search_fields = ["pattern", "intent__slug"]
    list_select_related = ["intent"]

    @admin.display(description="Pattern", ordering="pattern")
    def short_pattern(self, obj: IntentPattern) -> str:
        return shortened(obj.pattern, 80)


@admin.register(IntentExample)
class IntentExampleAdmin(admin.ModelAdmin):
    """Examples the intent classifier learns from; saving one retrains it (a worker task)."""

    list_display = ["text", "intent", "source", "created_at"]
    list_filter = ["intent", "source"]
    search_fields = ["text"]
    list_select_related = ["intent"]
    readonly_fields = ["created_at"]


@admin.register(QueryTypeExample)
class QueryTypeExampleAdmin(admin.ModelAdmin):
    """Examples the query-type classifier learns from; saving one retrains it."""

    list_display = ["text", "query_type", "source", "created_at"]
    list_filter = ["query_type", "source"]
    search_fields = ["text"]
    readonly_fields = ["created_at"]


@admin.register(ClassifierModel)
class ClassifierModelAdmin(ReadOnlyAdmin):
    """The trained versions; the newest of each kind is in use."""

    list_display = ["__str__", "kind", "examples", "accuracy", "created_at"]
    list_filter = ["kind"]
    exclude = ["artefact"]  # the model's numbers: megabytes of JSON


@admin.register(ScopePattern)
class ScopePatternAdmin(admin.ModelAdmin):
    list_display = ["short_pattern", "scope", "kind", "weight", "enabled"]
    list_filter = ["scope", "kind", "enabled"]
    search_fields = ["pattern"]

    @admin.display(description="Pattern", ordering="pattern")
    def short_pattern(self, obj: ScopePattern) -> str:
        return shortened(obj.pattern, 80)


@admin.register(RoutingPolicy)
class RoutingPolicyAdmin(admin.ModelAdmin):
    list_display = [
        "__str__",
        "weight_match",
        "weight_health",
        "weight_performance",
        "confidence_threshold",
        "llm_classification_enabled",
        "updated_at",
    ]
    list_filter = ["llm_classification_enabled"]
    search_fields = ["key"]
    fieldsets = [
        (
            "Scoring weights",
            {"fields": ["weight_match", "weight_health", "weight_performance", "weight_tokens"]},
        ),
        (
            "Learning",
            {
                "fields": [
                    "performance_window",
                    "half_life_seconds",
                    "half_life_attempts",
                    "failure_cost_seconds",
                    "prior_strength",
                    "exploration",
                    "latency_ceiling_ms",
                    "token_ceiling",
                ]
            },
        ),
        (
            "Classification",
            {"fields": ["confidence_threshold", "llm_classification_enabled", "learn_from_llm"]},
        ),
        ("Cooldown", {"fields": ["cooldown_failures", "cooldown_seconds"]}),
        ("Time", {"fields": ["query_budget_seconds", "hedging"]}),
        (
            "Caches",
            {
                "fields": [
                    "flow_cache_ttl_seconds",
                    "health_cache_ttl_seconds",
                    "answer_cache_ttl_seconds",
                ]
            },
        ),
    ]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return not RoutingPolicy.objects.exists()  # there is one policy

    def changelist_view(self, request: HttpRequest, extra_context: Any = None) -> HttpResponse:
        """The one policy opens directly: a list of one row is a click too many."""
        policy = RoutingPolicy.objects.order_by("pk").first()
        if policy is not None and not request.GET:
            return HttpResponseRedirect(
                reverse("admin:routing_routingpolicy_change", args=[policy.pk])
            )
        return super().changelist_view(request, extra_context)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class SplitArmInline(admin.TabularInline):
    model = SplitArm
    fields = ["label", "backend", "flow", "weight"]
    autocomplete_fields = ["backend", "flow"]
    extra = 2


@admin.register(Split)
class SplitAdmin(admin.ModelAdmin):
    """A/B splits: an intent's questions go first to its arms, in proportion to their
    weights; the analytics page compares the arms."""

    list_display = ["intent", "enabled", "arms_shown", "note", "updated_at"]
    list_filter = ["enabled"]
    inlines = [SplitArmInline]

    def get_queryset(self, request: HttpRequest) -> QuerySet[Split]:
        return super().get_queryset(request).select_related("intent").prefetch_related("arms")

    @admin.display(description="arms")
    def arms_shown(self, obj: Split) -> str:
        arms = list(obj.arms.all())
        total = sum(a.weight for a in arms) or 1
        return ", ".join(f"{a.label} {a.weight * 100 / total:.0f} %" for a in arms)


@admin.register(SplitArm)
class SplitArmAdmin(admin.ModelAdmin):
    """Every arm of every split (each is edited with its split)."""

    list_display = ["label", "split", "backend", "flow", "weight"]
    list_select_related = ["split__intent", "backend", "flow"]
    autocomplete_fields = ["backend", "flow"]


TURN_FIELDS = ("created_at", "question", "answer", "intent", "backend", "flow")


class TurnInline(admin.TabularInline):
    model = Turn
    fields = TURN_FIELDS
    readonly_fields = TURN_FIELDS
    extra = 0
    can_delete = False

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(Session)
class SessionAdmin(admin.ModelAdmin):
    list_display = ["first_question", "turn_count", "tenant", "created_at", "updated_at"]
    list_filter = ["tenant"]
    search_fields = ["id", "turns__question"]
    list_select_related = ["tenant"]
    readonly_fields = ["id", "created_at", "updated_at"]
    inlines = [TurnInline]

    def get_queryset(self, request: HttpRequest) -> QuerySet[Session]:
        first = Turn.objects.filter(session=OuterRef("pk")).order_by("created_at", "id")
        return (
            super()
            .get_queryset(request)
            .annotate(turns_n=Count("turns"), first_q=Subquery(first.values("question")[:1]))
        )

    @admin.display(description="First question")
    def first_question(self, obj: Session) -> str:
        return shortened(getattr(obj, "first_q", None) or "(no turn yet)", 80)

    @admin.display(description="Turns", ordering="turns_n")
    def turn_count(self, obj: Session) -> int:
        return int(getattr(obj, "turns_n", 0))


@admin.register(Turn)
class TurnAdmin(ReadOnlyAdmin):
    list_display = ["session", "created_at", "intent", "backend", "flow"]
    list_filter = ["intent", "backend"]
    search_fields = ["question", "answer", "session__id"]
    list_select_related = ["session", "backend", "flow"]

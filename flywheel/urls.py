"""URL configuration: admin, health probes and the versioned REST API."""

from __future__ import annotations

import json

from django.contrib import admin
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.urls import include, path, re_path
from django.views import defaults
from drf_spectacular.views import SpectacularAPIView, SpectacularRedocView, SpectacularSwaggerView
from rest_framework.routers import SimpleRouter

from analytics import api as analytics_api
from analytics import pages
from backends.api import BackendViewSet
from chatflows import chatflow_api
from chatflows.api import BackendDiscoverView, FlowListView, FlowView
from dialects import flowise_api, langflow_api, openai_api, openai_responses
from flywheel import errors, views
from routing import api as routing_api
from routing import chat

router = SimpleRouter(trailing_slash=False)
router.register("backends", BackendViewSet, basename="backend")

api_v1 = [
    *router.urls,
    # Discovery is chatflows', under the backends' URLs. The router's patterns are
    # anchored (^backends/{id}$, ^backends/{id}/health-check$), so none of them
    # takes this path, whichever comes first.
    re_path(
        rf"^backends/(?P<pk>{BackendViewSet.lookup_value_regex})/discover$",
        BackendDiscoverView.as_view(),
        name="backend-discover",
    ),
    path("flows", FlowListView.as_view(), name="flows"),
    re_path(
        rf"^flows/(?P<pk>{BackendViewSet.lookup_value_regex})$", FlowView.as_view(), name="flow"
    ),
    path("chatflows", chatflow_api.chatflows, name="chatflows"),
    path("chatflows/generate", chatflow_api.chatflow_generate_view, name="chatflow-generate"),
    path("chatflows/<str:chatflow_id>", chatflow_api.chatflow, name="chatflow"),
    path(
        "chatflows/<str:chatflow_id>/deploy",
        chatflow_api.chatflow_deploy_view,
        name="chatflow-deploy",
    ),
    path(
        "chatflows/<str:chatflow_id>/predict",
        routing_api.chatflow_predict,
        name="chatflow-predict",
    ),
    path("query", routing_api.query, name="query"),
    path("route", routing_api.route, name="route"),
    path("sessions", routing_api.SessionListView.as_view(), name="sessions"),
    path("sessions/<uuid:session_id>", routing_api.SessionView.as_view(), name="session"),
    # Routing writes the decisions; analytics reads them back.
    path("decisions", analytics_api.DecisionListView.as_view(), name="decisions"),
    path(
        "decisions/<str:request_id>",
        analytics_api.DecisionDetailView.as_view(),
        name="decision",
    ),
    path(
        "analytics/backends-by-intent",
        analytics_api.BackendsByIntentView.as_view(),
        name="analytics-backends-by-intent",
    ),
    path(
        "analytics/timeseries", analytics_api.TimeseriesView.as_view(), name="analytics-timeseries"
    ),
    path("analytics/splits", analytics_api.SplitsView.as_view(), name="analytics-splits"),
    path(
        "analytics/classification",
        analytics_api.ClassificationView.as_view(),
        name="analytics-classification",
    ),
    path(
        "visualize/<uuid:session_id>",
        analytics_api.VisualizeView.as_view(),
        name="visualize",
    ),
    path("query-router/route", routing_api.query_router_route, name="query-router-route"),
    path("query-router/patterns", routing_api.query_router_patterns, name="query-router-patterns"),
    path("query-router/status", routing_api.query_router_status, name="query-router-status"),
    path("whoami", views.WhoAmIView.as_view(), name="whoami"),
    path("schema", SpectacularAPIView.as_view(), name="schema"),
    path("docs", SpectacularSwaggerView.as_view(url_name="api:schema"), name="docs"),
    path("redoc", SpectacularRedocView.as_view(url_name="api:schema"), name="redoc"),
]

urlpatterns = [
    path("", pages.home, name="home"),
    path("analytics/", pages.analytics_page, name="analytics"),
    path("analytics/decisions/", pages.decisions_page, name="analytics-decisions"),
    path("decisions/<uuid:request_id>", pages.decision_trace, name="decision-trace"),
    path("v/<uuid:session_id>/", pages.session_page, name="session-visualization"),
    path("chat/", chat.chat_page, name="chat"),
    path("chat/ask", chat.chat_ask, name="chat-ask"),
    path("chat/conversations", chat.chat_conversations, name="chat-conversations"),
    path(
        "chat/conversations/<uuid:session_id>",
        chat.chat_conversation,
        name="chat-conversation",
    ),
    path("favicon.ico", views.favicon, name="favicon"),
    path("healthz", views.healthz, name="healthz"),
    path("readyz", views.readyz, name="readyz"),
    path("metrics", views.metrics, name="metrics"),
    path("admin/", admin.site.urls),
    path("api/v1/", include((api_v1, "api"))),
    # The OpenAI-compatible door (dialects/): an OpenAI client's base URL is <site>/v1.
    path("v1/chat/completions", openai_api.chat_completions, name="openai-chat-completions"),
    path("v1/models", openai_api.models, name="openai-models"),
    path("v1/responses", openai_responses.responses, name="openai-responses"),
    # Flowise's and Langflow's run APIs (dialects/): an application changes its base URL.
    path(
        "compat/flowise/api/v1/prediction/<str:flow>",
        flowise_api.prediction,
        name="flowise-prediction",
    ),
    path(
        "compat/flowise/api/v1/chatflows-streaming/<str:flow>",
        flowise_api.chatflows_streaming,
        name="flowise-chatflows-streaming",
    ),
    path("compat/langflow/api/v1/run/<str:flow>", langflow_api.run, name="langflow-run"),
]

admin.site.site_header = "Flywheel administration"
# The lists (backends, decisions, patterns) need the width more than a second menu:
# the home page and the breadcrumbs lead everywhere.
admin.site.enable_nav_sidebar = False
admin.site.site_title = "Flywheel"


def handler400(request: HttpRequest, exception: Exception) -> HttpResponse:
    """A request Django refused as suspicious (too many fields, a body too large, ...)."""
    if request.path.startswith("/api/"):
        body = errors.error_body(
            "BadRequest",
            "The request could not be accepted as sent.",
            {"reason": type(exception).__name__},  # e.g. TooManyFieldsSent; never its text
        )
        return JsonResponse(body, status=400)
    return defaults.bad_request(request, exception)


def handler404(request: HttpRequest, exception: Exception) -> HttpResponse:
    if request.path.startswith("/api/"):
        return errors.not_found(request, exception)
    if request.path.startswith("/v1/"):  # the OpenAI-compatible door: its errors' shape
        found = errors.not_found(request, exception)
        return JsonResponse(openai_api.openai_error(json.loads(found.content)), status=404)
    if request.path.startswith("/compat/flowise/"):
        found = errors.not_found(request, exception)
        return JsonResponse(flowise_api.flowise_error(json.loads(found.content), 404), status=404)
    if request.path.startswith("/compat/langflow/"):
        found = errors.not_found(request, exception)
        return JsonResponse(langflow_api.langflow_error(json.loads(found.content)), status=404)
    return defaults.page_not_found(request, exception)


def handler500(request: HttpRequest) -> HttpResponse:
    if request.path.startswith("/api/"):
        return errors.server_error(request)
    return defaults.server_error(request)

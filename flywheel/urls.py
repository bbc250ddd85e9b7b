"""URL configuration: admin, health probes and the versioned REST API."""

from __future__ import annotations

from django.contrib import admin
from django.http import HttpRequest, HttpResponse
from django.urls import include, path
from django.views import defaults
from drf_spectacular.views import SpectacularAPIView, SpectacularRedocView, SpectacularSwaggerView
from rest_framework.routers import SimpleRouter

from backends.api import BackendViewSet
from chatflows.api import FlowListView
from flywheel import errors, views

router = SimpleRouter(trailing_slash=False)
router.register("backends", BackendViewSet, basename="backend")

api_v1 = [
    *router.urls,
    path("flows", FlowListView.as_view(), name="flows"),
    path("whoami", views.WhoAmIView.as_view(), name="whoami"),
    path("schema", SpectacularAPIView.as_view(), name="schema"),
    path("docs", SpectacularSwaggerView.as_view(url_name="api:schema"), name="docs"),
    path("redoc", SpectacularRedocView.as_view(url_name="api:schema"), name="redoc"),
]

urlpatterns = [
    path("healthz", views.healthz, name="healthz"),
    path("readyz", views.readyz, name="readyz"),
    path("admin/", admin.site.urls),
    path("api/v1/", include((api_v1, "api"))),
]

admin.site.site_header = "Flywheel administration"
admin.site.site_title = "Flywheel"


def handler404(request: HttpRequest, exception: Exception) -> HttpResponse:
    if request.path.startswith("/api/"):
        return errors.not_found(request, exception)
    return defaults.page_not_found(request, exception)


def handler500(request: HttpRequest) -> HttpResponse:
    if request.path.startswith("/api/"):
        return errors.server_error(request)
    return defaults.server_error(request)

"""REST doors for backends: CRUD, health check and discovery on demand."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from backends.adapters import run_sync
from backends.models import Backend, BackendKind
from backends.selectors import backend_get_for, backends_visible_to
from backends.services import ahealth_check, backend_create, backend_delete, backend_update
from chatflows.services import adiscover
from flywheel.authentication import request_api_key
from flywheel.errors import PermissionDeniedError


class BackendHealthSerializer(serializers.Serializer):
    healthy = serializers.BooleanField()
    last_checked_at = serializers.DateTimeField(allow_null=True)
    latency_ms = serializers.FloatField(allow_null=True)
    last_error = serializers.CharField()
    consecutive_failures = serializers.IntegerField()
    cooldown_until = serializers.DateTimeField(allow_null=True)


class BackendSerializer(serializers.Serializer):
    """A backend as the API shows it: the API key can be written, never read."""

    id = serializers.IntegerField(read_only=True)
    name = serializers.CharField(max_length=100)
    kind = serializers.ChoiceField(choices=BackendKind.choices)
    base_url = serializers.URLField(max_length=500)
    api_key = serializers.CharField(
        max_length=500, write_only=True, required=False, allow_blank=True, trim_whitespace=True
    )
    has_api_key = serializers.BooleanField(read_only=True)
    enabled = serializers.BooleanField(required=False)
    timeout_seconds = serializers.FloatField(min_value=0.1, required=False)
    weight = serializers.FloatField(min_value=0, required=False)
    shared = serializers.SerializerMethodField()
    health = serializers.SerializerMethodField()

    def get_shared(self, backend: Backend) -> bool:
        return backend.tenant_id is None

    @extend_schema(responses=BackendHealthSerializer(allow_null=True))
    def get_health(self, backend: Backend) -> dict[str, Any] | None:
        health = getattr(backend, "health", None)
        return None if health is None else BackendHealthSerializer(health).data


class HealthOutcomeSerializer(serializers.Serializer):
    backend = serializers.CharField()
    ok = serializers.BooleanField()
    latency_ms = serializers.FloatField(allow_null=True)
    error = serializers.CharField()
    in_cooldown = serializers.BooleanField()


class DiscoveryReportSerializer(serializers.Serializer):
    backend = serializers.CharField()
    added = serializers.IntegerField()
    updated = serializers.IntegerField()
    removed = serializers.IntegerField()
    unchanged = serializers.IntegerField()
    total = serializers.IntegerField()


def _editable(request: Request, backend: Backend) -> Backend:
    if backend.tenant_id is None:
        raise PermissionDeniedError(
            "Shared backends are managed by an administrator.", details={"id": backend.pk}
        )
    return backend


class BackendViewSet(viewsets.ViewSet):
    """Backends the caller's tenant can use: shared ones and its own."""

    serializer_class = BackendSerializer
    queryset = Backend.objects.none()  # only tells the schema generator the id's type

    def _backend(self, request: Request, pk: str) -> Backend:
        return backend_get_for(request_api_key(request).tenant, pk)

    def list(self, request: Request) -> Response:
        backends = backends_visible_to(request_api_key(request).tenant)
        return Response(BackendSerializer(backends, many=True).data)

    def create(self, request: Request) -> Response:
        serializer = BackendSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        backend = backend_create(
            tenant=request_api_key(request).tenant, **serializer.validated_data
        )
        return Response(BackendSerializer(backend).data, status=status.HTTP_201_CREATED)

    def retrieve(self, request: Request, pk: str) -> Response:
        return Response(BackendSerializer(self._backend(request, pk)).data)

    def update(self, request: Request, pk: str) -> Response:
        return self._update(request, pk, partial=False)

    def partial_update(self, request: Request, pk: str) -> Response:
        return self._update(request, pk, partial=True)

    def _update(self, request: Request, pk: str, *, partial: bool) -> Response:
        backend = _editable(request, self._backend(request, pk))
        serializer = BackendSerializer(backend, data=request.data, partial=partial)
        serializer.is_valid(raise_exception=True)
        backend = backend_update(backend=backend, **serializer.validated_data)
        return Response(BackendSerializer(backend).data)

    def destroy(self, request: Request, pk: str) -> Response:
        backend_delete(backend=_editable(request, self._backend(request, pk)))
        return Response(status=status.HTTP_204_NO_CONTENT)

    @extend_schema(request=None, responses=HealthOutcomeSerializer)
    @action(detail=True, methods=["post"], url_path="health-check")
    def health_check(self, request: Request, pk: str) -> Response:
        outcome = run_sync(ahealth_check, self._backend(request, pk))
        return Response(HealthOutcomeSerializer(outcome).data)

    @extend_schema(request=None, responses=DiscoveryReportSerializer)
    @action(detail=True, methods=["post"])
    def discover(self, request: Request, pk: str) -> Response:
        report = run_sync(adiscover, self._backend(request, pk))
        return Response(DiscoveryReportSerializer(report).data)

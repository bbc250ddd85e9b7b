"""REST doors for backends: CRUD and health check on demand.

A tenant sees its own backends whole (the API key excepted: write-only) and
of a shared backend only its id, name, kind and health state. Discovery on
demand, POST /api/v1/backends/{id}/discover, is served by chatflows/api.py.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.extensions import OpenApiSerializerFieldExtension
from drf_spectacular.utils import PolymorphicProxySerializer, extend_schema, extend_schema_field
from rest_framework import serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from backends.adapters import kind_choices
from backends.addresses import without_userinfo
from backends.contract import BackendKind, BackendRequest, PatchedBackendRequest, backend_fields
from backends.models import (
    MAX_NAME,
    MAX_TIMEOUT_SECONDS,
    MAX_URL,
    MAX_WEIGHT,
    MIN_TIMEOUT_SECONDS,
    Backend,
)
from backends.selectors import backend_get_for, backends_visible_to
from backends.services import (
    backend_create,
    backend_delete,
    backend_onboard,
    backend_update,
    backends_health_check_now,
)
from flywheel.authentication import request_api_key
from flywheel.errors import ApplicationError, PermissionDeniedError
from flywheel.schemas import openapi_schema


class BackendHealthSerializer(serializers.Serializer):
    healthy = serializers.BooleanField()
    in_cooldown = serializers.BooleanField()
    last_checked_at = serializers.DateTimeField(allow_null=True)
    latency_ms = serializers.FloatField(allow_null=True)
    last_error = serializers.CharField()
    consecutive_failures = serializers.IntegerField()
    cooldown_until = serializers.DateTimeField(allow_null=True)


class SharedHealthSerializer(serializers.Serializer):
    healthy = serializers.BooleanField()
    in_cooldown = serializers.BooleanField()


class KindField(serializers.ChoiceField):
    """A backend kind: one the adapter registry has, read each time a serializer is made."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(choices=kind_choices(), **kwargs)


class KindFieldScheme(OpenApiSerializerFieldExtension):
    """A kind shown reads in the schema as a kind sent does (backends/contract.py), so
    both are one enum."""

    target_class = KindField

    def map_serializer_field(self, auto_schema: Any, direction: str) -> dict[str, Any]:
        return openapi_schema(BackendKind)


class BackendURLField(serializers.URLField):
    """A backend URL, shown without user-info even where an old row holds some."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(max_length=MAX_URL, **kwargs)

    def to_representation(self, value: str) -> str:
        return without_userinfo(value)


# What a body may set is declared in backends/contract.py; this shows a backend (its
# docstring is published).
class BackendSerializer(serializers.Serializer):
    """One of the caller's own backends: its settings, never its API key (has_api_key
    says whether one is kept)."""

    id = serializers.IntegerField(read_only=True)
    name = serializers.CharField(max_length=MAX_NAME)
    kind = KindField()
    base_url = BackendURLField()
    has_api_key = serializers.BooleanField(read_only=True)
    enabled = serializers.BooleanField(required=False)
    timeout_seconds = serializers.FloatField(
        min_value=MIN_TIMEOUT_SECONDS, max_value=MAX_TIMEOUT_SECONDS, required=False
    )
    weight = serializers.FloatField(min_value=0, max_value=MAX_WEIGHT, required=False)
    shared = serializers.SerializerMethodField()
    health = serializers.SerializerMethodField()

    @extend_schema_field({"type": "boolean", "enum": [False]})
    def get_shared(self, backend: Backend) -> bool:
        return False

    @extend_schema_field(BackendHealthSerializer(allow_null=True))
    def get_health(self, backend: Backend) -> dict[str, Any] | None:
        health = getattr(backend, "health", None)
        return None if health is None else BackendHealthSerializer(health).data


class SharedBackendSerializer(serializers.Serializer):
    """A shared backend as a tenant sees it: what it is called and whether it is up."""

    id = serializers.IntegerField(read_only=True)
    name = serializers.CharField(read_only=True)
    kind = KindField(read_only=True)
    shared = serializers.SerializerMethodField()
    health = serializers.SerializerMethodField()

    @extend_schema_field({"type": "boolean", "enum": [True]})
    def get_shared(self, backend: Backend) -> bool:
        return True

    @extend_schema_field(SharedHealthSerializer(allow_null=True))
    def get_health(self, backend: Backend) -> dict[str, Any] | None:
        health = getattr(backend, "health", None)
        return None if health is None else SharedHealthSerializer(health).data


def _shown_schema(*, many: bool) -> PolymorphicProxySerializer:
    """For the schema: one of the caller's own backends, or a shared one (told by ``shared``)."""
    return PolymorphicProxySerializer(
        component_name="ShownBackend",
        serializers=[BackendSerializer, SharedBackendSerializer],
        resource_type_field_name=None,
        many=many,
    )


def backend_shown(backend: Backend) -> dict[str, Any]:
    """A backend as a tenant's key may see it (every door shows this): a shared one by
    name, kind and health only; the tenant's own with its settings, never its key."""
    if backend.tenant_id is None:
        return SharedBackendSerializer(backend).data
    return BackendSerializer(backend).data


class HealthOutcomeSerializer(serializers.Serializer):
    backend = serializers.CharField()
    ok = serializers.BooleanField()
    latency_ms = serializers.FloatField(allow_null=True)
    error = serializers.CharField()
    in_cooldown = serializers.BooleanField()


class OnboardingHealthSerializer(serializers.Serializer):
    ok = serializers.BooleanField()
    latency_ms = serializers.FloatField(allow_null=True)
    error = serializers.CharField(allow_blank=True)
    in_cooldown = serializers.BooleanField()


class OnboardingFlowSerializer(serializers.Serializer):
    name = serializers.CharField()
    deployed = serializers.BooleanField()
    generic = serializers.BooleanField(help_text="It serves any question.")
    serves = serializers.ListField(
        child=serializers.CharField(), help_text="Its first intents and keywords."
    )


class OnboardingFlowsSerializer(serializers.Serializer):
    discovered = serializers.BooleanField()
    total = serializers.IntegerField(required=False, help_text="Flows found.")
    added = serializers.IntegerField(required=False, help_text="Flows new to Flywheel.")
    routable = serializers.IntegerField(
        required=False, help_text="Deployed flows that serve an intent or are generic."
    )
    error = serializers.CharField(required=False, help_text="Why nothing was discovered.")
    listed = OnboardingFlowSerializer(
        many=True, required=False, help_text="The first 20 flows found, by name."
    )


class OnboardingSerializer(serializers.Serializer):
    """What registering found: the backend was probed and its flows discovered at once."""

    health = OnboardingHealthSerializer(allow_null=True, help_text="None: not probed now.")
    flows = OnboardingFlowsSerializer(required=False)


class BackendCreatedSerializer(BackendSerializer):
    onboarding = OnboardingSerializer(read_only=True)

    # A plain boolean here: a third enum of one value named "shared" would collide.
    @extend_schema_field({"type": "boolean", "description": "Always false: it is yours."})
    def get_shared(self, backend: Backend) -> bool:
        return False


def _editable(request: Request, backend: Backend) -> Backend:
    if backend.tenant_id is None:
        raise PermissionDeniedError(
            "Shared backends are managed by an administrator.", details={"id": backend.pk}
        )
    return backend


def only_result(results: list[Any]) -> Any:
    """The one slot of an on-demand run, raising the error that stopped it."""
    (result,) = results
    if isinstance(result, ApplicationError):
        raise result
    return result


class BackendViewSet(viewsets.ViewSet):
    """Backends the caller's tenant can use: shared ones and its own."""

    serializer_class = BackendSerializer
    queryset = Backend.objects.none()  # only tells the schema generator the id's type
    # ASCII digits only, and no more than a bigint holds: anything else is a 404.
    lookup_value_regex = "[0-9]{1,18}"

    def _backend(self, request: Request, pk: str) -> Backend:
        return backend_get_for(request_api_key(request).tenant, pk)

    @extend_schema(responses=_shown_schema(many=True))
    def list(self, request: Request) -> Response:
        backends = backends_visible_to(request_api_key(request).tenant)
        return Response([backend_shown(backend) for backend in backends])

    @extend_schema(request=BackendRequest, responses={201: BackendCreatedSerializer})
    def create(self, request: Request) -> Response:
        fields = backend_fields(BackendRequest, request.data)
        backend = backend_create(tenant=request_api_key(request).tenant, **fields)
        onboarding = backend_onboard(backend=backend)  # probed and discovered now
        created = {**BackendSerializer(backend).data, "onboarding": onboarding}
        return Response(created, status=status.HTTP_201_CREATED)

    @extend_schema(responses=_shown_schema(many=False))
    def retrieve(self, request: Request, pk: str) -> Response:
        return Response(backend_shown(self._backend(request, pk)))

    @extend_schema(request=BackendRequest)
    def update(self, request: Request, pk: str) -> Response:
        return self._update(request, pk, BackendRequest)

    @extend_schema(request=PatchedBackendRequest)
    def partial_update(self, request: Request, pk: str) -> Response:
        return self._update(request, pk, PatchedBackendRequest)

    def _update(self, request: Request, pk: str, contract: type[BackendRequest]) -> Response:
        backend = _editable(request, self._backend(request, pk))
        backend = backend_update(backend=backend, **backend_fields(contract, request.data))
        return Response(BackendSerializer(backend).data)

    def destroy(self, request: Request, pk: str) -> Response:
        backend_delete(backend=_editable(request, self._backend(request, pk)))
        return Response(status=status.HTTP_204_NO_CONTENT)

    @extend_schema(request=None, responses=HealthOutcomeSerializer)
    @action(detail=True, methods=["post"], url_path="health-check")
    def health_check(self, request: Request, pk: str) -> Response:
        """Probe one of the caller's own backends now (at most once per 10 s)."""
        outcome = only_result(
            backends_health_check_now(
                backends=[self._backend(request, pk)], tenant=request_api_key(request).tenant
            )
        )
        return Response(HealthOutcomeSerializer(outcome).data)

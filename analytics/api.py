"""REST doors for reading routing decisions: the tenant's list, one by request id, and
the analytics of them (backends per intent, time series; JSON or CSV).

Routing writes the decisions (routing.models); these views only read them,
through analytics.selectors and analytics.reads.
"""

from __future__ import annotations

import uuid
from typing import Any

from django.http import Http404
from drf_spectacular.utils import (
    extend_schema,
    extend_schema_view,
    inline_serializer,
)
from rest_framework import serializers
from rest_framework.generics import ListAPIView
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from analytics.access import Scope, scope_for_key, scope_for_user
from analytics.classification_report import classification_summary
from analytics.csv_export import (
    CSV,
    CsvRenderer,
    CsvTable,
    backends_by_intent_table,
    timeseries_table,
)
from analytics.filters import FORMAT_RULE, AnalyticsQuery, AnswerFormat, DecisionFilters
from analytics.models import Granularity
from analytics.reads import backends_by_intent, timeseries
from analytics.selectors import decision_get, decisions_for
from analytics.serializers import DecisionSerializer
from analytics.splits import split_arms
from analytics.visualize import session_visualization
from flywheel.authentication import (
    ApiKeyAuthentication,
    PageLoginAuthentication,
    request_api_key,
)
from flywheel.errors import ValidationError
from flywheel.openapi import query_parameters
from flywheel.rest import StrictLimitOffsetPagination, absolute_url, query_values
from routing.recording.compact import names_for


class DecisionPagination(StrictLimitOffsetPagination):
    """Decisions: 50 a page unless ``limit`` says otherwise, 500 at most."""


@extend_schema_view(get=extend_schema(parameters=query_parameters(DecisionFilters)))
class DecisionListView(ListAPIView):
    """GET /api/v1/decisions?intent=&outcome=&backend=&session=: the tenant's decisions."""

    serializer_class = DecisionSerializer
    pagination_class = DecisionPagination

    def get_serializer(self, *args: Any, **kwargs: Any) -> Any:
        if kwargs.get("many") and args:  # a page: its names in one query per kind of row
            page = list(args[0])
            kwargs["context"] = {**self.get_serializer_context(), "names": names_for(page)}
            args = (page, *args[1:])
        return super().get_serializer(*args, **kwargs)

    def get_queryset(self) -> Any:
        params = self.request.query_params
        return decisions_for(
            request_api_key(self.request).tenant,
            intent=params.get("intent"),
            outcome=params.get("outcome"),
            backend=params.get("backend"),
            session_id=params.get("session"),
        )


class DecisionDetailView(APIView):
    """GET /api/v1/decisions/{request_id}."""

    @extend_schema(responses=DecisionSerializer)
    def get(self, request: Request, request_id: str) -> Response:
        decision = decision_get(request_api_key(request).tenant, request_id)
        return Response(DecisionSerializer(decision, context={"request": request}).data)


# --- analytics: backends per intent, time series ---------------------------------------

RANGE = ("since", "until", "intent", "tenant")  # the parameters of every range read, in order


def reader_scope(request: Request) -> Scope:
    """Whose decisions the caller reads: an API key's tenant, or a logged-in person's
    (analytics.access). Raises PermissionDeniedError or ValidationError."""
    tenant = request.query_params.get("tenant") or None
    if request.auth is not None:
        return scope_for_key(request_api_key(request), tenant=tenant)
    return scope_for_user(request.user, tenant=tenant)


class _RangeView(APIView):
    """What both analytics views share: JSON or CSV, errors always in JSON, and the
    reader: an API key, or the session of a person on the analytics page (its CSV links)."""

    authentication_classes = [ApiKeyAuthentication, PageLoginAuthentication]
    renderer_classes = [JSONRenderer, CsvRenderer]

    def perform_content_negotiation(self, request: Request, force: bool = False) -> Any:
        # DRF ignores an empty ?format= and answers 404 to an unknown one: both are a 400.
        query_values(request, AnswerFormat)
        try:
            return super().perform_content_negotiation(request, force=force)
        except Http404 as err:  # csv, of a view that answers JSON only
            raise ValidationError(
                "The format parameter is not valid.", details={"fields": {"format": FORMAT_RULE}}
            ) from err

    def finalize_response(
        self, request: Request, response: Response, *args: Any, **kwargs: Any
    ) -> Response:
        if not isinstance(response.data, CsvTable):  # errors, OPTIONS: JSON, whatever was asked
            request.accepted_renderer, request.accepted_media_type = (
                JSONRenderer(),
                "application/json",
            )
        return super().finalize_response(request, response, *args, **kwargs)

    def _params(self) -> dict[str, str | None]:
        params = self.request.query_params
        return {name: params.get(name) or None for name in ("since", "until", "intent")}

    def _csv(self) -> bool:
        return getattr(self.request.accepted_renderer, "format", None) == "csv"


class BackendStatsSerializer(serializers.Serializer):
    backend = serializers.CharField()
    requests = serializers.IntegerField(help_text="Attempts on this backend.")
    success_rate = serializers.FloatField(allow_null=True)
    fallback_rate = serializers.FloatField(
        allow_null=True, help_text="Failed attempts whose query was answered all the same."
    )
    p50_ms = serializers.FloatField(allow_null=True)
    p95_ms = serializers.FloatField(allow_null=True)
    mean_score = serializers.FloatField(allow_null=True)
    won = serializers.IntegerField(help_text="Decisions this backend answered.")
    share = serializers.FloatField(allow_null=True, help_text="won / the intent's decisions.")
    avg_tokens = serializers.FloatField(
        allow_null=True,
        help_text="Mean total tokens over the attempts whose backend reported usage (flows "
        "with LLM nodes); null when none did.",
    )
    avg_cost = serializers.FloatField(
        allow_null=True,
        help_text="Mean cost over the attempts whose backend reported one; null when none "
        "did (neither Flowise nor Langflow reports a cost).",
    )


class IntentStatsSerializer(serializers.Serializer):
    intent = serializers.CharField()
    decisions = serializers.IntegerField()
    answered = serializers.IntegerField()
    cached = serializers.IntegerField()
    backends = BackendStatsSerializer(many=True)
    preferred = serializers.DictField(
        help_text="The backend routing would try first for this intent now (backend, flow, "
        "score and its factors, recent_attempts), why in words, and every candidate; "
        "backend is null when none could serve it."
    )


class _RangeSerializer(serializers.Serializer):
    since = serializers.DateTimeField(help_text="The range read, widened to whole buckets.")
    until = serializers.DateTimeField()
    granularity = serializers.ChoiceField(choices=Granularity.choices)


class BackendsByIntentSerializer(_RangeSerializer):
    intents = IntentStatsSerializer(many=True)


class PointSerializer(serializers.Serializer):
    start = serializers.DateTimeField()
    requests = serializers.IntegerField()
    success_rate = serializers.FloatField(allow_null=True)
    p95_ms = serializers.FloatField(allow_null=True)


class SeriesSerializer(serializers.Serializer):
    backend = serializers.CharField()
    buckets = PointSerializer(many=True)


class TimeseriesSerializer(_RangeSerializer):
    backends = SeriesSerializer(many=True)


class BackendsByIntentView(_RangeView):
    """GET /api/v1/analytics/backends-by-intent?since=&until=&intent=&format=."""

    @extend_schema(
        parameters=query_parameters(AnalyticsQuery, *RANGE, "format"),
        responses={
            (200, "application/json"): BackendsByIntentSerializer,
            (200, "text/csv"): CSV,
        },
    )
    def get(self, request: Request) -> Response:
        """Per intent, each backend's requests, rates, latency, score and share."""
        found = backends_by_intent(tenant=reader_scope(request).tenant, **self._params())
        if not self._csv():
            return Response(BackendsByIntentSerializer(found).data)
        return Response(backends_by_intent_table(found))


class TimeseriesView(_RangeView):
    """GET /api/v1/analytics/timeseries?since=&until=&intent=&backend=&format=."""

    @extend_schema(
        parameters=query_parameters(AnalyticsQuery, *RANGE, "backend", "format"),
        responses={(200, "application/json"): TimeseriesSerializer, (200, "text/csv"): CSV},
    )
    def get(self, request: Request) -> Response:
        """Per backend, its minute (ranges up to 6 hours) or hour buckets."""
        found = timeseries(
            tenant=reader_scope(request).tenant,
            backend=request.query_params.get("backend") or None,
            **self._params(),
        )
        if not self._csv():
            return Response(TimeseriesSerializer(found).data)
        return Response(timeseries_table(found))


class MethodShareSerializer(serializers.Serializer):
    method = serializers.CharField(help_text="rules, context, example, model, llm or override.")
    decisions = serializers.IntegerField()
    share = serializers.FloatField()


class CorrectionSerializer(serializers.Serializer):
    intent = serializers.CharField(help_text="What the cascade said.")
    corrected_to = serializers.CharField(help_text="What an admin said it was.")
    decisions = serializers.IntegerField()


class ClassifierSerializer(serializers.Serializer):
    kind = serializers.CharField(help_text="intent or query_type.")
    version = serializers.IntegerField()
    examples = serializers.IntegerField()
    accuracy = serializers.FloatField(help_text="Cross-validated on its examples.")
    trained_at = serializers.DateTimeField()


class ClassificationSerializer(serializers.Serializer):
    since = serializers.DateTimeField()
    until = serializers.DateTimeField()
    decisions = serializers.IntegerField(help_text="Decisions with a classified intent.")
    methods = MethodShareSerializer(many=True)
    corrections = CorrectionSerializer(many=True)
    models = ClassifierSerializer(many=True, help_text="The learned classifiers in use.")
    examples = serializers.DictField(
        child=serializers.DictField(child=serializers.IntegerField()),
        help_text="Per classifier, its examples per source (shipped, admin, correction, llm).",
    )


class ClassificationView(_RangeView):
    """GET /api/v1/analytics/classification?since=&until=."""

    renderer_classes = [JSONRenderer]

    @extend_schema(
        parameters=query_parameters(AnalyticsQuery, "since", "until", "tenant"),
        responses={200: ClassificationSerializer},
    )
    def get(self, request: Request) -> Response:
        """Which step of the cascade classified the questions, what admins corrected, and
        the learned classifiers in use."""
        params = self._params()
        found = classification_summary(
            tenant=reader_scope(request).tenant, since=params["since"], until=params["until"]
        )
        return Response(ClassificationSerializer(found).data)


class SplitArmSerializer(serializers.Serializer):
    arm = serializers.CharField(help_text="The arm's label, as the admin named it.")
    backend = serializers.CharField()
    flow = serializers.CharField()
    questions = serializers.IntegerField()
    share = serializers.FloatField(help_text="Of the intent's split questions.")
    first_answered = serializers.FloatField(help_text="Answered by the arm itself.")
    answered = serializers.FloatField(help_text="Answered at all (after fallback too).")
    median_ms = serializers.FloatField(allow_null=True)
    p90_ms = serializers.FloatField(allow_null=True)


class SplitIntentSerializer(serializers.Serializer):
    intent = serializers.CharField()
    questions = serializers.IntegerField()
    arms = SplitArmSerializer(many=True)


class SplitsSerializer(serializers.Serializer):
    since = serializers.DateTimeField()
    until = serializers.DateTimeField()
    intents = SplitIntentSerializer(many=True)


class SplitsView(_RangeView):
    """GET /api/v1/analytics/splits?since=&until=&intent=."""

    renderer_classes = [JSONRenderer]

    @extend_schema(
        parameters=query_parameters(AnalyticsQuery, *RANGE), responses={200: SplitsSerializer}
    )
    def get(self, request: Request) -> Response:
        """Per intent, each A/B split arm's questions, answer rates and times."""
        found = split_arms(tenant=reader_scope(request).tenant, **self._params())
        return Response(SplitsSerializer(found).data)


class VisualizeView(APIView):
    """GET /api/v1/visualize/{session_id}: seed 002's visualisation data of a session
    (an API key's tenant's, or what a logged-in reader may see: the page's JSON link)."""

    authentication_classes = [ApiKeyAuthentication, PageLoginAuthentication]

    @extend_schema(
        responses=inline_serializer(
            "SessionVisualization",
            {
                "session_id": serializers.UUIDField(),
                "tenant": serializers.CharField(),
                "created_at": serializers.DateTimeField(),
                "updated_at": serializers.DateTimeField(),
                "visualization_url": serializers.CharField(),
                "turns": serializers.ListField(
                    child=serializers.DictField(),
                    help_text="Each decision of the session, oldest first: question, "
                    "intent (intent, method, confidence, evidence), query_type, "
                    "candidates, fallback_chain, outcome, answered_by, answer, error, "
                    "timings, trace_url.",
                ),
            },
        )
    )
    def get(self, request: Request, session_id: uuid.UUID) -> Response:
        """Each turn of the session and how it was routed (the route takes UUIDs only:
        any other id is a 404, like an unknown one)."""
        found = session_visualization(scope=reader_scope(request), session_id=session_id)
        found["visualization_url"] = absolute_url(request, found["visualization_url"])
        for turn in found["turns"]:
            turn["trace_url"] = absolute_url(request, turn["trace_url"])
        return Response(found)

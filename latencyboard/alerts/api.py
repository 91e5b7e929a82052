"""REST API of incidents and alerts (list, read, acknowledge, resolve), rules and channels.

Alerts, rules and channels of teams the user is not in do not exist here (404). Members
read; on-call and admins acknowledge and resolve (403 for others); team admins write rules
and channels.
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_view
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import ValidationError
from rest_framework.pagination import LimitOffsetPagination
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.serializers import BaseSerializer

from latencyboard.alerts import queries, services
from latencyboard.alerts.models import (
    OPEN_STATUSES,
    Alert,
    AlertStatus,
    Channel,
    Incident,
    Rule,
)
from latencyboard.alerts.preview import PREVIEW_SECONDS, TooManyStages, preview_rule, unsaved_rule
from latencyboard.alerts.rule_reach import rule_reach
from latencyboard.alerts.serializers import (
    AlertDetailSerializer,
    AlertSerializer,
    ChannelSerializer,
    DeliverySerializer,
    IncidentSerializer,
    NoteSerializer,
    RulePreviewSerializer,
    RuleSerializer,
    StageReachSerializer,
)
from latencyboard.detectors.replay import OutOfTime
from latencyboard.fairness.heavy_reads import HeavyRead

STATUS_FILTERS = {
    "open": OPEN_STATUSES,
    **{value: (value,) for value in AlertStatus.values},
}

MAX_OFFSET = 10**9
"""Beyond any team's history, and inside PostgreSQL's bigint."""


class Pages(LimitOffsetPagination):
    """Alerts and incidents pile up for ever: a list answers ``limit`` of them (50 unless
    asked, at most 500) from ``offset``, with the total ``count`` and ``next``/``previous``
    links."""

    default_limit = 50
    max_limit = 500

    def get_offset(self, request: Request) -> int:
        offset = super().get_offset(request)
        if offset > MAX_OFFSET:
            raise ValidationError({"offset": f"At most {MAX_OFFSET}."})
        return offset


@extend_schema(tags=["alerts"])
@extend_schema_view(
    list=extend_schema(
        summary="Alerts of my teams' pipelines, newest first",
        parameters=[
            OpenApiParameter(
                "status", OpenApiTypes.STR, enum=sorted(STATUS_FILTERS), description="Filter."
            )
        ],
    ),
    retrieve=extend_schema(summary="One alert with its evidence, history and deliveries"),
)
class AlertViewSet(
    mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet[Alert]
):
    pagination_class = Pages
    lookup_url_kwarg = "alert_id"

    def get_queryset(self) -> QuerySet[Alert]:
        alerts = queries.alerts_of(self.request.user)
        wanted = self.request.query_params.get("status")
        if self.action == "list" and wanted:
            if wanted not in STATUS_FILTERS:
                raise ValidationError({"status": f"One of {', '.join(sorted(STATUS_FILTERS))}."})
            alerts = alerts.filter(status__in=STATUS_FILTERS[wanted])
        return alerts

    def get_serializer_context(self) -> dict[str, Any]:
        context = dict(super().get_serializer_context())
        admins = queries.admin_teams(self.request.user)
        context["admin_team_ids"] = set(admins.values_list("pk", flat=True))
        return context

    def get_serializer_class(self) -> type[BaseSerializer[Alert]]:
        return AlertDetailSerializer if self.action != "list" else AlertSerializer

    @extend_schema(
        summary="Acknowledge a firing alert and its incident (on-call and admins)",
        request=NoteSerializer,
        responses={200: AlertDetailSerializer, 409: OpenApiTypes.OBJECT},
    )
    @action(detail=True, methods=["post"])
    def ack(self, request: Request, alert_id: str | None = None) -> Response:
        alert = self.get_object()
        given = NoteSerializer(data=request.data)
        given.is_valid(raise_exception=True)
        note = given.validated_data["note"]
        if not services.acknowledge(alert, request.user, timezone.now(), request, note):
            return _not_open(alert, "firing")
        return Response(AlertDetailSerializer(alert, context=self.get_serializer_context()).data)

    @extend_schema(
        summary="Resolve an open alert by hand (on-call and admins)",
        request=NoteSerializer,
        responses={200: AlertDetailSerializer, 409: OpenApiTypes.OBJECT},
    )
    @action(detail=True, methods=["post"])
    def resolve(self, request: Request, alert_id: str | None = None) -> Response:
        alert = self.get_object()
        given = NoteSerializer(data=request.data)
        given.is_valid(raise_exception=True)
        note = given.validated_data["note"]
        if not services.resolve(alert, request.user, timezone.now(), note, request):
            return _not_open(alert, "open")
        return Response(AlertDetailSerializer(alert, context=self.get_serializer_context()).data)


@extend_schema(tags=["alerts"])
@extend_schema_view(
    list=extend_schema(
        summary="Incidents of my teams' pipelines, newest first",
        parameters=[
            OpenApiParameter(
                "state", OpenApiTypes.STR, enum=sorted(STATUS_FILTERS), description="Filter."
            )
        ],
    ),
    retrieve=extend_schema(summary="One incident with its member alerts' ids"),
)
class IncidentViewSet(
    mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet[Incident]
):
    serializer_class = IncidentSerializer
    pagination_class = Pages
    lookup_url_kwarg = "incident_id"

    def get_queryset(self) -> QuerySet[Incident]:
        incidents = queries.incidents_of(self.request.user).prefetch_related("alerts")
        wanted = self.request.query_params.get("state")
        if self.action == "list" and wanted:
            if wanted not in STATUS_FILTERS:
                raise ValidationError({"state": f"One of {', '.join(sorted(STATUS_FILTERS))}."})
            incidents = incidents.filter(status__in=STATUS_FILTERS[wanted])
        return incidents


def _not_open(alert: Alert, wanted: str) -> Response:
    alert.refresh_from_db(fields=["status"])
    return Response(
        {"detail": f"The alert is {alert.status}, not {wanted}.", "status": alert.status},
        status=status.HTTP_409_CONFLICT,
    )


class _AdminWrites:
    """Members read; writes need the admin role in the object's team, or in any team to
    create (else 403, checked before the input is), and reach only the teams the user
    administers."""

    def team_of(self, instance: Any) -> int:
        raise NotImplementedError

    def get_serializer_context(self) -> dict[str, Any]:
        context: dict[str, Any] = super().get_serializer_context()  # type: ignore[misc]
        context["admin_teams"] = queries.admin_teams(self.request.user)  # type: ignore[attr-defined]
        return context

    def _check_writable(self, team_id: int | None = None) -> None:
        teams = queries.admin_teams(self.request.user)  # type: ignore[attr-defined]
        if team_id is not None:
            teams = teams.filter(pk=team_id)
        if not teams.exists():
            raise PermissionDenied("Only team admins change alert rules and channels.")

    def perform_create(self, serializer: BaseSerializer[Any]) -> None:
        saved = serializer.save()
        services.record_setting(self.request, saved, "created", serializer.validated_data)  # type: ignore[attr-defined]

    def perform_update(self, serializer: BaseSerializer[Any]) -> None:
        assert serializer.instance is not None  # an update
        before = services.setting_values(serializer.instance, serializer.validated_data)
        saved = serializer.save()
        services.record_setting(self.request, saved, "changed", serializer.validated_data, before)  # type: ignore[attr-defined]

    def perform_destroy(self, instance: Any) -> None:
        services.record_setting(self.request, instance, "deleted", {})  # type: ignore[attr-defined]
        instance.delete()

    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        self._check_writable()
        return super().create(request, *args, **kwargs)  # type: ignore[misc]

    def update(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        self._check_writable(self.team_of(self.get_object()))  # type: ignore[attr-defined]
        return super().update(request, *args, **kwargs)  # type: ignore[misc]

    def destroy(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        self._check_writable(self.team_of(self.get_object()))  # type: ignore[attr-defined]
        return super().destroy(request, *args, **kwargs)  # type: ignore[misc]


def _admin_crud_schema(listed: str, one: str, deleted: str) -> Any:
    """The schema of a viewset everyone reads and only team admins write: ``one`` is the
    object with its article ("an alert rule"), ``deleted`` what a delete removes."""
    return extend_schema_view(
        list=extend_schema(summary=listed),
        retrieve=extend_schema(summary=f"One {one.split(' ', 1)[1]}"),
        create=extend_schema(summary=f"Create {one} (team admins)"),
        update=extend_schema(summary=f"Replace {one} (team admins)"),
        partial_update=extend_schema(summary=f"Change {one} (team admins)"),
        destroy=extend_schema(summary=f"Delete {deleted} (team admins)"),
    )


@extend_schema(tags=["alerts"])
@_admin_crud_schema(
    "Alert rules of my teams' pipelines", "an alert rule", "an alert rule and its alerts"
)
class RuleViewSet(HeavyRead, _AdminWrites, viewsets.ModelViewSet[Rule]):
    serializer_class = RuleSerializer
    heavy_actions = frozenset({"preview", "reach"})
    lookup_url_kwarg = "rule_id"

    def get_queryset(self) -> QuerySet[Rule]:
        return queries.rules_of(self.request.user)

    def team_of(self, instance: Rule) -> int:
        return instance.pipeline.team_id

    @extend_schema(
        summary="Would this rule have fired in the last 7 days? (team admins)",
        description="The rule's settings, as for creating it, replayed with the regression "
        "detector over the pipeline's minute rollups, each hour against the same hours of the "
        "previous days (else today's baselines). Nothing is saved.",
        request=RuleSerializer,
        responses={200: RulePreviewSerializer, 400: OpenApiTypes.OBJECT, 503: OpenApiTypes.OBJECT},
    )
    @action(detail=False, methods=["post"])
    def preview(self, request: Request) -> Response:
        self._check_writable()
        given = self.get_serializer(data=request.data)
        given.is_valid(raise_exception=True)
        rule, stages = unsaved_rule(given.validated_data)
        try:
            found = preview_rule(rule, stages, timezone.now())
        except TooManyStages as exc:
            raise ValidationError({"stages": str(exc)}) from None
        except OutOfTime:
            return Response(
                {"detail": f"The preview took over {PREVIEW_SECONDS:g} s; choose fewer stages."},
                status=status.HTTP_503_SERVICE_UNAVAILABLE,
            )
        return Response(RulePreviewSerializer(found).data)

    @extend_schema(
        summary="What can this rule find at its pipeline's traffic?",
        description="Per watched stage, the smallest slowdown of the whole stage its "
        "regression detector finds within the rule's window with 80% probability, at the "
        "last hour's requests and against the stage's baseline (null when out of reach: "
        "not even +300%), and the window +25% needs.",
        responses={200: StageReachSerializer(many=True)},
    )
    @action(detail=True, methods=["get"])
    def reach(self, request: Request, rule_id: str | None = None) -> Response:
        found = rule_reach(self.get_object(), timezone.now())
        return Response(StageReachSerializer(found, many=True).data)


@extend_schema(tags=["alerts"])
@_admin_crud_schema(
    "Notification channels of my teams (secrets never shown)",
    "a notification channel",
    "a notification channel",
)
class ChannelViewSet(_AdminWrites, viewsets.ModelViewSet[Channel]):
    serializer_class = ChannelSerializer
    lookup_url_kwarg = "channel_id"

    def get_queryset(self) -> QuerySet[Channel]:
        return queries.channels_of(self.request.user)

    def team_of(self, instance: Channel) -> int:
        return instance.team_id

    def get_serializer_context(self) -> dict[str, Any]:
        context = super().get_serializer_context()
        context["admin_team_ids"] = set(context["admin_teams"].values_list("pk", flat=True))
        return context

    @extend_schema(
        summary="Send a test notification through the outbox (team admins)",
        request=None,
        responses={202: DeliverySerializer},
    )
    @action(detail=True, methods=["post"])
    def test(self, request: Request, channel_id: str | None = None) -> Response:
        delivery = services.send_test(self.get_object(), request.user, timezone.now())
        shown = DeliverySerializer(delivery, context=self.get_serializer_context()).data
        return Response(shown, status=status.HTTP_202_ACCEPTED)

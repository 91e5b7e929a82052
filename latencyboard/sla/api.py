"""REST API of SLA objectives: list, create, read, delete, attainment over time, and
maintenance windows.

Objectives of teams the user is not in do not exist here (404, never 403); within their own
teams, members read and only admins create or delete objectives and maintenance windows (403).
"""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from django.shortcuts import get_object_or_404
from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import (
    OpenApiExample,
    OpenApiParameter,
    extend_schema,
    extend_schema_view,
)
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import NotFound
from rest_framework.request import Request
from rest_framework.response import Response

from latencyboard.audit_trail import act
from latencyboard.sla import queries, services, versions
from latencyboard.sla.models import Objective
from latencyboard.sla.serializers import (
    AttainmentQuerySerializer,
    AttainmentSeriesSerializer,
    MaintenanceWindowCreateSerializer,
    MaintenanceWindowSerializer,
    ObjectiveCreateSerializer,
    ObjectiveSerializer,
)
from latencyboard.sla.version_serializers import ObjectiveEditSerializer

_ATTAINMENT_EXAMPLE = {
    "start": "2026-11-20T00:00:00Z",
    "end": "2026-11-20T02:00:00Z",
    "step_seconds": 3600,
    "buckets": [
        {
            "start": "2026-11-20T00:00:00Z",
            "end": "2026-11-20T01:00:00Z",
            "good": 998,
            "total": 1000,
            "attainment_percent": 99.8,
        },
        {
            "start": "2026-11-20T01:00:00Z",
            "end": "2026-11-20T02:00:00Z",
            "good": 0,
            "total": 0,
            "attainment_percent": None,
        },
    ],
    "burn_down": [
        {
            "at": "2026-11-20T01:00:00Z",
            "good": 998,
            "total": 1000,
            "remaining_percent": -100.0,
        },
        {
            "at": "2026-11-20T02:00:00Z",
            "good": 998,
            "total": 1000,
            "remaining_percent": -100.0,
        },
    ],
    "maintenance": [{"start": "2026-11-20T01:00:00Z", "end": "2026-11-20T01:30:00Z"}],
    "window": {
        "kind": "rolling_28d",
        "start": "2026-10-23T12:01:00Z",
        "end": "2026-11-20T12:01:00Z",
    },
    "summary": {
        "good": 2_000_123,
        "total": 2_001_000,
        "bad": 877,
        "target_percent": "99.900",
        "attainment_percent": 99.95617191404298,
        "met": True,
        "allowed_bad": "2001.00000",
        "remaining_bad": "1124.00000",
        "consumed_percent": 43.828085957021486,
        "remaining_percent": 56.171914042978514,
    },
    "excluded": {"good": 1_200, "total": 1_250},
}


@extend_schema(tags=["slas"])
@extend_schema_view(
    list=extend_schema(summary="SLA objectives of my teams"),
    retrieve=extend_schema(summary="One SLA objective"),
)
class ObjectiveViewSet(
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    viewsets.GenericViewSet[Objective],
):
    serializer_class = ObjectiveSerializer
    # Named as everywhere else (pages, the outsider test), not the router's generic ``pk``.
    lookup_url_kwarg = "objective_id"

    def get_queryset(self) -> QuerySet[Objective]:
        return queries.objectives_of(self.request.user)

    @extend_schema(
        summary="Create an SLA objective (team admins)",
        description="Counts every retained span already rolled up; the rollup worker counts "
        "the rest. The objective belongs to the pipeline's team.",
        request=ObjectiveCreateSerializer,
        responses={201: ObjectiveSerializer},
    )
    def create(self, request: Request) -> Response:
        given = ObjectiveCreateSerializer(data=request.data, context={"request": request})
        given.is_valid(raise_exception=True)
        data = given.validated_data
        objective = services.create_objective(
            team=data["pipeline"].team,
            pipeline=data["pipeline"],
            stage=data["stage"],
            name=data["name"],
            threshold_ms=float(data["threshold_ms"]),
            target_percent=data["target_percent"],
            window=data["window"],
            created_by=request.user,
        )
        act(
            request,
            "objective.created",
            versions.audit_subject(objective),
            versions.audit_detail(objective),
        )
        return Response(ObjectiveSerializer(objective).data, status=status.HTTP_201_CREATED)

    @extend_schema(
        summary="Edit an SLA objective's name, threshold or target (team admins)",
        description="A new version from this minute on: earlier counters keep the old "
        "threshold, later minutes are recounted with the new one.",
        request=ObjectiveEditSerializer,
        responses={200: ObjectiveSerializer},
    )
    def partial_update(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        objective = self.get_object()
        given = ObjectiveEditSerializer(data=request.data)
        given.is_valid(raise_exception=True)
        data = given.validated_data
        edit = versions.edit_objective(
            objective,
            name=data.get("name", objective.name),
            threshold_ms=float(data.get("threshold_ms", objective.threshold_ms)),
            target_percent=data.get("target_percent", objective.target_percent),
            edited_by=request.user,
            now=timezone.now(),
        )
        act(
            request,
            "objective.edited",
            versions.audit_subject(edit.objective),
            versions.edit_detail(edit),
        )
        return Response(ObjectiveSerializer(edit.objective).data)

    @extend_schema(summary="Delete an SLA objective and its counters (team admins)")
    def destroy(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        objective = self.get_object()
        if services.delete_objective(objective, deleted_by=request.user):
            act(
                request,
                "objective.deleted",
                versions.audit_subject(objective),
                versions.audit_detail(objective),
            )
        return Response(status=status.HTTP_204_NO_CONTENT)

    @extend_schema(
        summary="Attainment over time and error budget of the objective's window",
        parameters=[AttainmentQuerySerializer],
        responses={200: AttainmentSeriesSerializer},
        examples=[OpenApiExample("Two hours", value=_ATTAINMENT_EXAMPLE, response_only=True)],
    )
    @action(detail=True, methods=["get"])
    def attainment(self, request: Request, objective_id: str | None = None) -> Response:
        objective = self.get_object()
        now = timezone.now()
        given = AttainmentQuerySerializer(
            data=request.query_params, context={"now": now, "default_window": objective.window}
        )
        given.is_valid(raise_exception=True)
        series = queries.attainment(
            objective,
            given.validated_data["start"],
            given.validated_data["end"],
            given.validated_data["step"],
            now,
        )
        return Response(AttainmentSeriesSerializer(series).data)

    @extend_schema(
        methods=["GET"],
        summary="Maintenance windows covering the objective",
        description="Its own and its pipeline's, by start. Deleted windows stay listed with "
        "deleted_at and deleted_by; they no longer exclude anything.",
        responses={200: MaintenanceWindowSerializer(many=True)},
    )
    @extend_schema(
        methods=["POST"],
        summary="Add a maintenance window (team admins)",
        description="Attainment leaves out every minute that starts in [start, end), of this "
        "objective or (covers: pipeline) of every objective of its pipeline. The exact "
        "counters are not changed.",
        request=MaintenanceWindowCreateSerializer,
        responses={201: MaintenanceWindowSerializer},
    )
    @action(detail=True, methods=["get", "post"], url_path="maintenance")
    def maintenance(self, request: Request, objective_id: str | None = None) -> Response:
        objective = self.get_object()
        if request.method == "GET":
            windows = queries.maintenance_windows(objective)
            return Response(MaintenanceWindowSerializer(windows, many=True).data)
        given = MaintenanceWindowCreateSerializer(data=request.data)
        given.is_valid(raise_exception=True)
        window = services.add_maintenance_window(
            objective,
            covers=given.validated_data["covers"],
            start=given.validated_data["start"],
            end=given.validated_data["end"],
            reason=given.validated_data["reason"],
            created_by=request.user,
            now=timezone.now(),
        )
        act(
            request,
            "maintenance.added",
            versions.audit_subject(objective),
            versions.maintenance_detail(window),
        )
        return Response(MaintenanceWindowSerializer(window).data, status=status.HTTP_201_CREATED)

    @extend_schema(
        summary="Delete a maintenance window (team admins)",
        description="The row stays, with deleted_at and deleted_by, and excludes nothing "
        "from then on. 404 when it is already deleted.",
        parameters=[OpenApiParameter("window_id", OpenApiTypes.INT, OpenApiParameter.PATH)],
        responses={204: None},
    )
    @action(
        detail=True,
        methods=["delete"],
        url_path=r"maintenance/(?P<window_id>[0-9]+)",
        url_name="maintenance-detail",
    )
    def delete_maintenance(
        self, request: Request, objective_id: str | None = None, window_id: str | None = None
    ) -> Response:
        objective = self.get_object()
        window = get_object_or_404(
            queries.maintenance_windows(objective), pk=window_id, deleted_at__isnull=True
        )
        if not services.delete_maintenance_window(window, request.user, timezone.now()):
            raise NotFound("Already deleted.")
        act(
            request,
            "maintenance.deleted",
            versions.audit_subject(objective),
            versions.maintenance_detail(window),
        )
        return Response(status=status.HTTP_204_NO_CONTENT)

"""The reports API for scripts (API tokens or a session), with the pages' roles: auditors and
admins of a team request its reports, read them and download their files, and read its audit
log. Everyone else gets 404 for them."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import User
from django.core.exceptions import ValidationError as DjangoValidationError
from django.http import HttpResponse
from django.shortcuts import get_object_or_404
from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import generics, status
from rest_framework.exceptions import Throttled, ValidationError
from rest_framework.pagination import LimitOffsetPagination
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from audits import queries, services
from audits.forms import LogFilterForm
from audits.models import AuditEvent, Report
from audits.serializers import AuditEventSerializer, ReportRequestSerializer, ReportSerializer
from audits.views import file_response
from latencyboard.pipelines.models import Pipeline

MAX_OFFSET = 10**9  # past any log's length, within PostgreSQL's OFFSET


class AuditLogPages(LimitOffsetPagination):
    default_limit = 100
    max_limit = 500

    def get_offset(self, request: Request) -> int:
        return min(super().get_offset(request), MAX_OFFSET)


@extend_schema(tags=["audits"])
class ReportListView(APIView):
    @extend_schema(
        summary="Reports of the teams I audit, newest first", responses=ReportSerializer(many=True)
    )
    def get(self, request: Request) -> Response:
        reports = queries.reports_of(request.user)[:100]
        return Response(ReportSerializer(reports, many=True, context={"request": request}).data)

    @extend_schema(
        summary="Request a quarterly report (auditors and admins of the team)",
        request=ReportRequestSerializer,
        responses={201: ReportSerializer},
    )
    def post(self, request: Request) -> Response:
        given = ReportRequestSerializer(data=request.data)
        given.is_valid(raise_exception=True)
        data = given.validated_data
        team = get_object_or_404(queries.audited_teams(request.user), pk=data["team"])
        pipelines = None
        if data.get("pipelines"):
            wanted = set(data["pipelines"])
            pipelines = list(Pipeline.objects.filter(team=team, pk__in=wanted))
            if len(pipelines) != len(wanted):
                raise ValidationError({"pipelines": "Not a pipeline of this team."})
        user = request.user
        assert isinstance(user, User)  # IsAuthenticated
        try:
            report = services.request_report(
                request, team, data["year"], data["quarter"], pipelines, user, timezone.now()
            )
        except DjangoValidationError as error:
            raise ValidationError(error.message_dict) from error
        except services.ReportsPending as busy:
            raise Throttled(wait=busy.retry_after_s, detail=str(busy)) from busy
        body = ReportSerializer(report, context={"request": request}).data
        return Response(body, status=status.HTTP_201_CREATED)


@extend_schema(tags=["audits"], summary="A report: state, coverage, files, signed manifest")
class ReportDetailView(generics.RetrieveAPIView[Report]):
    serializer_class = ReportSerializer
    lookup_url_kwarg = "report_id"

    def get_queryset(self) -> Any:
        return queries.reports_of(self.request.user)


@extend_schema(
    tags=["audits"], summary="Download one file of a report", responses={200: OpenApiTypes.BINARY}
)
class ReportFileView(APIView):
    def get(self, request: Request, report_id: int, file_name: str) -> HttpResponse:
        report = get_object_or_404(queries.reports_of(request.user), pk=report_id)
        return file_response(request, report, file_name)


@extend_schema(
    tags=["audits"],
    summary="The audit log of the teams I audit, newest first, with the page's filters",
    parameters=[
        OpenApiParameter(name, OpenApiTypes.STR, description=str(field.help_text))
        for name, field in LogFilterForm.base_fields.items()
    ],
)
class AuditLogView(generics.ListAPIView[AuditEvent]):
    serializer_class = AuditEventSerializer
    pagination_class = AuditLogPages

    def get_queryset(self) -> Any:
        form = LogFilterForm(self.request.query_params)
        if not form.is_valid():
            raise ValidationError(form.errors.get_json_data())
        events = queries.events_of(self.request.user).order_by("-at", "-id")
        return queries.filtered_events(events, form.cleaned_data)

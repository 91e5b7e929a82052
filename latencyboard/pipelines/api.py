"""REST API of pipelines: what the user's teams watch."""

from __future__ import annotations

from django.db.models import QuerySet
from drf_spectacular.utils import extend_schema
from rest_framework import generics

from latencyboard.pipelines.models import Pipeline
from latencyboard.pipelines.serializers import PipelineSerializer


@extend_schema(summary="Pipelines of my teams, with their stages")
class PipelineListView(generics.ListAPIView):
    """The pipelines of the teams the user belongs to, each with its team and stages."""

    serializer_class = PipelineSerializer

    def get_queryset(self) -> QuerySet[Pipeline]:
        return (
            Pipeline.objects.visible_to(self.request.user)
            .select_related("team")
            .prefetch_related("stages")
        )

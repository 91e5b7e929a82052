"""The reports API's shapes: a request for a report, a report with its files and signature,
and an audit event."""

from __future__ import annotations

import json
from typing import Any

from django.urls import reverse
from rest_framework import serializers

from audits import services
from audits.models import LOG_COLUMNS, AuditEvent, Report
from audits.signatures import MANIFEST, SIGNATURE

MAX_PIPELINES = 1000
MAX_ID = 2**63 - 1  # PostgreSQL's bigint


class ReportRequestSerializer(serializers.Serializer[Any]):
    team = serializers.IntegerField(min_value=1, max_value=MAX_ID, help_text="The team's id.")
    year = serializers.IntegerField(min_value=2000, max_value=2999)
    quarter = serializers.IntegerField(min_value=1, max_value=4)
    pipelines = serializers.ListField(
        child=serializers.IntegerField(min_value=1, max_value=MAX_ID),
        required=False,
        max_length=MAX_PIPELINES,
        help_text="Pipeline ids of the team; none or empty: all of them.",
    )


class ReportSerializer(serializers.ModelSerializer[Report]):
    """A report's state and, once done, its files (with SHA-256 and download links), its
    manifest and signature as JSON, and the public key to check them with."""

    team = serializers.CharField(source="team.name")
    team_id = serializers.IntegerField()
    provisional = serializers.SerializerMethodField()
    files = serializers.SerializerMethodField()
    manifest = serializers.SerializerMethodField()
    signature = serializers.SerializerMethodField()
    public_key = serializers.SerializerMethodField()

    class Meta:
        model = Report
        fields = [
            "id",
            "team",
            "team_id",
            "year",
            "quarter",
            "pipeline_ids",
            "status",
            "progress",
            "requested_at",
            "as_of",
            "finished_at",
            "error",
            "provisional",
            "files",
            "manifest",
            "signature",
            "public_key",
        ]

    def get_provisional(self, report: Report) -> bool | None:
        return None if report.as_of is None else services.is_provisional(report)

    def get_files(self, report: Report) -> list[dict[str, Any]]:
        request = self.context.get("request")
        files = []
        for f in report.files.order_by("name").only("name", "sha256", "content_type"):
            url = reverse("api-audit-report-file", args=[report.pk, f.name])
            files.append(
                {
                    "name": f.name,
                    "sha256": f.sha256,
                    "content_type": f.content_type,
                    "url": request.build_absolute_uri(url) if request is not None else url,
                }
            )
        return files

    def _json(self, report: Report, name: str) -> Any:
        stored = report.files.filter(name=name).first()
        return None if stored is None else json.loads(bytes(stored.content))

    def get_manifest(self, report: Report) -> Any:
        return self._json(report, MANIFEST)

    def get_signature(self, report: Report) -> Any:
        return self._json(report, SIGNATURE)

    def get_public_key(self, report: Report) -> str:
        return services.signing_key().public_key


class AuditEventSerializer(serializers.ModelSerializer[AuditEvent]):
    actor = serializers.CharField(source="actor_username")
    subject = serializers.CharField(source="subject_label")

    class Meta:
        model = AuditEvent
        fields = ["id", *LOG_COLUMNS]

"""Replaying OTLP export files through the live ingest path."""

from __future__ import annotations

import gzip
import io
import json
import uuid
from collections import Counter
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.utils import timezone

from ingest.replay import ReplayError, ReplayReport, replay_files
from latencyboard.spans.models import IngestBatch, Span
from latencyboard.teams.models import Team
from tests.factories import make_team
from tests.ingest.otlp import SpanSpec, export_request, signed

pytestmark = pytest.mark.django_db(transaction=True)

EXAMPLE = Path(__file__).parent / "data" / "trace.json"  # one span, from December 2018
FOREVER = 100 * 365


def _replay(team: Team, *paths: Path, max_age_days: int = 30) -> ReplayReport:
    return replay_files(team, paths, max_age_days=max_age_days, now=timezone.now())


def _protobuf_file(path: Path, *specs: SpanSpec) -> Path:
    path.write_bytes(export_request(*specs).SerializeToString())
    return path


def _otlp_json(*specs: SpanSpec) -> dict[str, object]:
    """An OTLP/JSON request, with hex ids and string nanoseconds as the specification has them."""
    spans = [
        {
            "traceId": spec.trace_id.hex(),
            "spanId": spec.span_id.hex(),
            "name": spec.name,
            "kind": spec.kind,
            "startTimeUnixNano": str(spec.start_ns),
            "endTimeUnixNano": str(spec.start_ns + spec.duration_ns),
        }
        for spec in specs
    ]
    service = {"key": "service.name", "value": {"stringValue": "recommender"}}
    return {
        "resourceSpans": [{"resource": {"attributes": [service]}, "scopeSpans": [{"spans": spans}]}]
    }


def _stored(team: Team) -> int:
    return Span.objects.filter(team=team).count()


def test_protobuf_file_is_stored_like_a_live_export(tmp_path):
    # given a binary ExportTraceServiceRequest of three spans
    team = make_team()
    specs = [SpanSpec(), SpanSpec(), SpanSpec()]
    path = _protobuf_file(tmp_path / "export.pb", *specs)

    # when it is replayed
    report = _replay(team, path)

    # then its spans are stored in one batch marked as a replay
    assert (report.files, report.requests, report.stored, report.duplicates) == (1, 1, 3, 0)
    assert set(Span.objects.filter(team=team).values_list("span_id", flat=True)) == {
        signed(spec.span_id) for spec in specs
    }
    assert list(IngestBatch.objects.filter(team=team).values_list("protocol", "stored_spans")) == [
        ("replay/protobuf", 3)
    ]


def test_protobuf_file_starting_like_json_is_read_as_protobuf(tmp_path):
    # given a request whose first ResourceSpans is 123 bytes long: it starts with "\n{"
    team = make_team()
    path = _protobuf_file(tmp_path / "export.pb", SpanSpec(name="x" * 36))
    assert path.read_bytes()[:2] == b"\n{"

    report = _replay(team, path)

    assert (report.requests, report.stored) == (1, 1)


def test_old_json_file_is_stored_when_the_age_limit_is_widened(tmp_path):
    team = make_team()

    report = _replay(team, EXAMPLE, max_age_days=FOREVER)

    assert (report.stored, report.rejected) == (1, 0)
    span = Span.objects.select_related("pipeline").get(team=team)
    assert span.pipeline.service_name == "my.service"
    assert span.trace_id == uuid.UUID("5b8efff798038103d269b633813fc60c")
    assert span.duration_ns == 1_000_000_000
    assert span.start_time.isoformat() == "2018-12-13T14:51:00+00:00"
    assert IngestBatch.objects.get(team=team).protocol == "replay/json"


def test_old_json_file_is_rejected_within_retention(tmp_path):
    team = make_team()

    report = _replay(team, EXAMPLE)

    assert (report.requests, report.stored, report.rejected) == (1, 0, 1)
    assert report.reasons == Counter({"start older than retention": 1})
    assert _stored(team) == 0


def test_replaying_twice_stores_each_span_once(tmp_path):
    team = make_team()
    path = _protobuf_file(tmp_path / "export.pb", SpanSpec(), SpanSpec())

    first = _replay(team, path)
    second = _replay(team, path)

    assert (first.stored, first.duplicates) == (2, 0)
    assert (second.stored, second.duplicates) == (0, 2)
    assert _stored(team) == 2


def test_gzipped_json_lines_are_one_request_per_line(tmp_path):
    # given the Collector's file exporter output: one request per line, here gzipped
    team = make_team()
    lines = [_otlp_json(SpanSpec(), SpanSpec()), _otlp_json(SpanSpec()), _otlp_json(SpanSpec())]
    path = tmp_path / "traces.jsonl.gz"
    path.write_bytes(gzip.compress("".join(json.dumps(line) + "\n" for line in lines).encode()))

    report = _replay(team, path)

    assert (report.requests, report.stored) == (3, 4)
    batches = IngestBatch.objects.filter(team=team).order_by("id")
    assert list(batches.values_list("protocol", "stored_spans")) == [
        ("replay/json", 2),
        ("replay/json", 1),
        ("replay/json", 1),
    ]


def test_bad_line_stops_the_replay_after_the_lines_before_it(tmp_path):
    team = make_team()
    path = tmp_path / "traces.jsonl"
    path.write_text(json.dumps(_otlp_json(SpanSpec())) + '\n{"resourceSpans": 7}\n')

    with pytest.raises(ReplayError, match=r"traces\.jsonl: line 2: resourceSpans must be") as error:
        _replay(team, path)

    assert (error.value.report.requests, error.value.report.stored) == (1, 1)
    assert _stored(team) == 1


def test_missing_file_stops_before_anything_is_stored(tmp_path):
    team = make_team()
    good = _protobuf_file(tmp_path / "good.pb", SpanSpec())

    with pytest.raises(ReplayError, match=r"missing\.pb: no such file"):
        _replay(team, good, tmp_path / "missing.pb")

    assert _stored(team) == 0


def test_command_names_a_corrupt_file_and_keeps_the_files_before_it(tmp_path):
    # given a good file, a truncated protobuf file and another good file
    team = make_team()
    first = _protobuf_file(tmp_path / "first.pb", SpanSpec(), SpanSpec())
    body = export_request(SpanSpec(), SpanSpec()).SerializeToString()
    corrupt = tmp_path / "corrupt.pb"
    corrupt.write_bytes(body[: len(body) // 2])
    last = _protobuf_file(tmp_path / "last.pb", SpanSpec())

    # when they are replayed in that order
    out = io.StringIO()
    with pytest.raises(CommandError) as error:
        call_command("replay_otlp", first, corrupt, last, "--team", team.slug, stdout=out)

    # then the error names the corrupt file, and only the first file is stored
    assert str(error.value).startswith(f"{corrupt}: invalid protobuf ExportTraceServiceRequest")
    assert "stored before it: requests=1 stored=2 duplicates=0 rejected=0;" in str(error.value)
    assert out.getvalue() == f"{first}: requests=1 stored=2 duplicates=0 rejected=0\n"
    assert _stored(team) == 2


def test_outsider_team_gets_nothing(tmp_path):
    team, outsider = make_team(), make_team("outsider")

    _replay(team, _protobuf_file(tmp_path / "export.pb", SpanSpec()))

    assert (_stored(team), _stored(outsider)) == (1, 0)
    assert IngestBatch.objects.filter(team=outsider).count() == 0

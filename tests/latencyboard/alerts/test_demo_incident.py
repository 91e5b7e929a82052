"""``manage.py demo_incident``: the file it writes slows the demo's stage, a rule watches
the pipeline and its baselines are computed at once; bad names are refused."""

from __future__ import annotations

import datetime as dt
import threading

import numpy as np
import pytest
from django.core.management import CommandError, call_command
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from latencyboard.alerts.models import Baseline, Rule
from latencyboard.demo.incident import Incident, IncidentFile, incident_path, write
from latencyboard.demo.profiles import PIPELINES
from latencyboard.demo.service import PipelineTraffic, make_tracer_provider, run_traffic
from latencyboard.pipelines.models import Pipeline, Stage
from latencyboard.rollups.models import Rollup
from latencyboard.sketches.sketch import Sketch
from latencyboard.teams.models import Team


def forward_median_ms(incident: Incident | None) -> float:
    fraud = PIPELINES[0]
    exporter = InMemorySpanExporter()
    provider = make_tracer_provider(fraud, SimpleSpanProcessor(exporter))
    run_traffic(
        [PipelineTraffic(fraud, provider.get_tracer("test"))],
        200.0,
        threading.Event(),
        duration_s=1.0,
        rng=np.random.default_rng(7),
        incident=lambda: incident,
    )
    provider.shutdown()
    forward = [
        (span.end_time or 0) - (span.start_time or 0)
        for span in exporter.get_finished_spans()
        if span.name == "model_forward"
    ]
    return float(np.median(forward))


def test_an_incident_slows_its_stage_of_the_running_demo():
    until = dt.datetime.now(dt.UTC).timestamp() + 60
    incident = Incident(PIPELINES[0].name, "model_forward", 3.0, until)

    ratio = forward_median_ms(incident) / forward_median_ms(None)

    assert 2.4 < ratio < 3.6


def test_the_incident_file_is_read_again_when_it_changes(tmp_path):
    path = incident_path(tmp_path)
    reader = IncidentFile(path)
    before = reader.current()
    write(path, Incident("fraud-scorer", "model_forward", 1.5, 100.0))
    first = reader.current()
    write(path, Incident("fraud-scorer", "preprocess", 2.0, 200.0))

    assert before is None
    assert first == Incident("fraud-scorer", "model_forward", 1.5, 100.0)
    assert reader.current() == Incident("fraud-scorer", "preprocess", 2.0, 200.0)


@pytest.mark.django_db
def test_the_command_writes_the_incident_adds_a_rule_and_computes_baselines(settings, tmp_path):
    settings.VAR_DIR = tmp_path
    team = Team.objects.create(name="Demo", slug="demo")
    pipeline = Pipeline.objects.create(team=team, service_name="fraud-scorer")
    stage = Stage.objects.create(pipeline=pipeline, name="model_forward")
    hour = dt.datetime.now(dt.UTC).replace(minute=0, second=0, microsecond=0)
    sketch = Sketch.from_values(np.full(500, 20.0))
    Rollup.objects.create(
        team=team,
        pipeline=pipeline,
        stage=stage,
        resolution="hour",
        bucket_start=hour - dt.timedelta(hours=2),
        count=500,
        error_count=0,
        sum_ms=sketch.sum,
        min_ms=20.0,
        max_ms=20.0,
        sketch=sketch.to_bytes(),
    )

    call_command("demo_incident", "fraud-scorer", "model_forward", "--factor", "1.5")

    written = IncidentFile(incident_path(tmp_path)).current()
    assert written is not None
    assert (written.pipeline, written.stage, written.factor) == (
        "fraud-scorer",
        "model_forward",
        1.5,
    )
    assert written.until_unix_s == pytest.approx(dt.datetime.now(dt.UTC).timestamp() + 1200, abs=5)
    assert list(Rule.objects.values_list("pipeline", "regression", "min_effect_ms")) == [
        (pipeline.pk, True, 1.0)
    ]
    assert Baseline.objects.get(stage=stage).n == 500


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("pipeline", "stage", "message"),
    [
        ("nope", "model_forward", "No demo pipeline 'nope'"),
        ("fraud-scorer", "nope", "fraud-scorer has no stage 'nope'"),
        ("fraud-scorer", "model_forward", "Team 'demo' has no pipeline 'fraud-scorer'"),
    ],
)
def test_the_command_refuses_unknown_names(settings, tmp_path, pipeline, stage, message):
    settings.VAR_DIR = tmp_path

    with pytest.raises(CommandError, match=message):
        call_command("demo_incident", pipeline, stage)

    assert not incident_path(tmp_path).exists()

"""The pipeline page's charts: one declaration each (``latencyboard.dashboards.charts``), which
the page, the API and the live updates read."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import pytest
from django.conf import settings
from django.utils import timezone

from latencyboard.dashboards import charts
from latencyboard.dashboards.charts import Chart, ChartRequest
from latencyboard.live.events import POINTS
from latencyboard.moments import iso_utc
from latencyboard.pipelines.models import Pipeline, Stage
from latencyboard.sla.models import Objective, SlaMinute
from latencyboard.windows import floor_minute
from tests.factories import make_team, make_user

WINDOW = {"window": "1h"}


@pytest.fixture
def scene() -> dict[str, Any]:
    """A pipeline of two stages with an objective, a member of its team and an outsider."""
    ours, theirs = make_team("ours"), make_team("theirs")
    pipeline = Pipeline.objects.create(team=ours, service_name="fraud-scorer", environment="prod")
    for name in ("preprocess", "model_forward"):
        Stage.objects.create(pipeline=pipeline, name=name)
    slo = Objective.objects.create(
        team=ours,
        pipeline=pipeline,
        name="fast",
        threshold_ms=60.0,
        target_percent=Decimal("99"),
    )
    return {
        "pipeline": pipeline,
        "objective": slo,
        "member": make_user(ours),
        "outsider": make_user(theirs),
    }


def page_config(content: bytes) -> Any:
    return json.loads(
        content.decode()
        .split('id="pipeline-config" type="application/json">')[1]
        .split("</script>")[0]
    )


def _stage_names(asked: ChartRequest) -> dict[str, Any]:
    names = asked.pipeline.stages.order_by("name").values_list("name", flat=True)
    return {"stages": list(names), "start": iso_utc(asked.params["start"])}


@pytest.fixture
def stage_names_chart() -> Iterator[Chart]:
    """A chart declared here, registered as the app's own are."""
    chart = charts.register(
        Chart(
            id="stage-names",
            title="Stage names",
            description="The pipeline's stages, by name.",
            series=_stage_names,
            answer=None,
            draws=("stage_names",),
            live=(POINTS,),
        )
    )
    yield chart
    del charts.CHARTS[chart.id]


@pytest.mark.django_db
def test_a_chart_declared_once_is_on_the_page_and_served_with_its_series(
    client, scene, stage_names_chart
):
    pipeline = scene["pipeline"]
    client.force_login(scene["member"])

    # when the member opens the pipeline page and fetches the chart's data as the page does
    page = client.get(f"/pipelines/{pipeline.pk}/")
    declared = next(c for c in page_config(page.content)["charts"] if c["id"] == "stage-names")
    answer = client.get(declared["url"], WINDOW)

    # then the page has its card and its draw function, follows its live event, and its
    # endpoint answers its series for this pipeline
    html = page.content.decode()
    assert declared == {
        "id": "stage-names",
        "url": f"/api/pipelines/{pipeline.pk}/stage-names/",
        "draws": ["stage_names"],
        "live": ["points"],
    }
    assert '<section class="card" id="stage-names">' in html
    assert '<div class="chart" id="chart-stage-names"' in html
    assert '<script src="/static/js/pipeline/stage_names.js">' in html
    assert answer.status_code == 200
    assert answer.json()["stages"] == ["model_forward", "preprocess"]


@pytest.mark.django_db
def test_a_chart_s_endpoint_is_in_the_schema_once_declared(client, stage_names_chart):
    schema = client.get("/api/schema/", {"format": "json"}).json()

    operation = schema["paths"]["/api/pipelines/{pipeline_id}/stage-names/"]["get"]
    assert operation["operationId"] == "pipeline_stage_names"
    assert operation["summary"] == "Stage names"
    assert set(operation["responses"]) == {"200", "400", "404"}


def test_charts_keep_their_ids_and_the_live_events_published():
    def chart(id_: str, live: tuple[str, ...] = ()) -> Chart:
        return Chart(
            id=id_, title="t", description="d", series=_stage_names, answer=None, live=live
        )

    with pytest.raises(ValueError, match="registered already"):
        charts.register(chart("percentiles"))
    with pytest.raises(ValueError, match="lower-case letters"):
        charts.register(chart("Stage_Names"))
    with pytest.raises(ValueError, match="No live event"):
        charts.register(chart("stage-names", live=("deployments",)))
    assert "stage-names" not in charts.CHARTS


@pytest.mark.django_db
def test_an_unknown_chart_is_not_found(client, scene):
    client.force_login(scene["member"])

    response = client.get(f"/api/pipelines/{scene['pipeline'].pk}/no-such-chart/", WINDOW)

    assert response.status_code == 404


def _query(chart: Chart, scene: dict[str, Any]) -> dict[str, Any]:
    """The window, and the objective to a chart of one objective."""
    if "objective" in chart.query().fields:
        return {**WINDOW, "objective": scene["objective"].pk}
    return WINDOW


@pytest.mark.django_db
@pytest.mark.parametrize("chart_id", list(charts.CHARTS))
def test_every_chart_answers_a_member_and_not_an_outsider(client, scene, chart_id):
    chart = charts.CHARTS[chart_id]
    url, query = chart.url(scene["pipeline"].pk), _query(chart, scene)

    # when a member of the pipeline's team and a user of another team ask for the chart
    client.force_login(scene["member"])
    mine = client.get(url, query)
    client.force_login(scene["outsider"])
    theirs = client.get(url, query)

    # then the member has it, and to the outsider the pipeline does not exist
    assert mine.status_code == 200, mine.content
    assert theirs.status_code == 404
    assert b"fraud-scorer" not in theirs.content
    assert b"preprocess" not in theirs.content


@pytest.mark.parametrize("chart", charts.shown(), ids=lambda chart: chart.id)
def test_every_draw_function_a_chart_names_is_registered_by_its_script(chart):
    for name in chart.draws:
        script = settings.BASE_DIR / "static" / "js" / "pipeline" / f"{name}.js"
        assert f'page.draw("{name}",' in script.read_text()


@pytest.mark.django_db
def test_the_sla_chart_answers_what_the_objective_s_api_answers(client, scene):
    # given 990 good requests of 1,000 in a minute twenty minutes ago
    slo = scene["objective"]
    minute = floor_minute(timezone.now()) - dt.timedelta(minutes=20)
    SlaMinute.objects.create(objective=slo, minute=minute, good=990, total=1000)
    client.force_login(scene["member"])
    query = {
        "start": iso_utc(minute - dt.timedelta(minutes=10)),
        "end": iso_utc(minute + dt.timedelta(minutes=10)),
        "step": "5m",
    }

    # when the chart and the objective's own API are asked for the same window
    chart = client.get(
        f"/api/pipelines/{scene['pipeline'].pk}/sla-attainment/", {**query, "objective": slo.pk}
    )
    own = client.get(f"/api/slas/{slo.pk}/attainment/", query)

    # then both count the same requests in the same steps
    assert chart.status_code == own.status_code == 200
    assert chart.json()["buckets"] == own.json()["buckets"]
    assert [b["total"] for b in chart.json()["buckets"]] == [0, 0, 1000, 0]


@pytest.mark.django_db
def test_the_sla_chart_refuses_an_objective_of_another_pipeline(client, scene):
    other = Pipeline.objects.create(team=scene["pipeline"].team, service_name="recommender")
    client.force_login(scene["member"])

    response = client.get(
        f"/api/pipelines/{other.pk}/sla-attainment/", {**WINDOW, "objective": scene["objective"].pk}
    )

    assert response.status_code == 400
    assert response.json() == {"objective": ["Not an objective of this pipeline."]}

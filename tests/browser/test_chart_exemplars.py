"""A point of the pipeline page's percentiles chart opens the traces behind it, in headless
Chromium, on a day of demo traffic folded as the workers fold it."""

from __future__ import annotations

import datetime as dt
import uuid
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from django.db import connection

from latencyboard.demo.profiles import MODEL_FORWARD
from latencyboard.pipelines.models import Pipeline, Stage
from latencyboard.traces import ids
from latencyboard.traces.exemplar_queries import EXEMPLAR_COUNT
from tests.browser.conftest import ARTIFACTS, answered, log_in, screenshot
from tests.browser.test_dashboards import Demo, demo, open_pipeline  # noqa: F401 - the fixture

pytestmark = pytest.mark.django_db(transaction=True)


@dataclass(frozen=True)
class Traffic:
    fraud: Pipeline
    forward: Stage
    member: str
    outsider: str


@pytest.fixture
def traffic(demo: Demo) -> Traffic:  # noqa: F811
    """A day of demo traffic folded into rollups (tests/browser/test_dashboards.py's); a member
    of its team and an outsider."""
    return Traffic(
        fraud=demo.fraud,
        forward=Stage.objects.get(pipeline=demo.fraud, name=MODEL_FORWARD),
        member=demo.member,
        outsider=demo.outsider,
    )


def open_at_p99(page: Any, live_web: Any, pipeline: Pipeline) -> dict[str, Any]:
    """Open the pipeline page (24 hours in 15-minute steps, p99); the percentiles API's answer."""
    with answered(page, r"/percentiles/") as answer:
        open_pipeline(page, live_web, pipeline)
    body: dict[str, Any] = answer.value.json()
    return body


def telling_point(api: dict[str, Any], stage: Stage) -> dict[str, Any]:
    """The busiest bucket of the stage whose p99 is over 3 error bounds away from its p95 and
    from the p99 of the buckets either side: there, the exact p99 of a wrong bucket or of a
    wrong quantile cannot lie within one bound of the plotted point (see the test)."""
    points = next(s for s in api["series"] if s["stage"]["id"] == stage.pk)["points"]
    apart = 3 * api["relative_error"]

    def telling(i: int) -> bool:
        p99 = points[i]["p99"]
        others = [points[i]["p95"], points[i - 1]["p99"], points[i + 1]["p99"]]
        return p99 is not None and all(
            other is not None and abs(other - p99) > apart * p99 for other in others
        )

    return max((points[i] for i in range(1, len(points) - 1) if telling(i)), key=lambda p: p["n"])


def point_centre(page: Any, trace_name: str, t: str) -> dict[str, float]:
    """Where the marker of the trace's point at ``t`` is drawn, in viewport pixels."""
    page.locator("#chart-percentiles").scroll_into_view_if_needed()
    centre: dict[str, float] = page.evaluate(
        """([name, t]) => {
            const chart = document.getElementById("chart-percentiles");
            const group = [...chart.querySelectorAll(".scatterlayer .trace")]
                .find((g) => g.__data__[0].trace.name === name);
            const xs = group.__data__[0].trace.x;
            const marker = [...group.querySelectorAll(".points path")]
                .find((path) => xs[path.__data__.i] === t);
            const box = marker.getBoundingClientRect();
            return { x: box.x + box.width / 2, y: box.y + box.height / 2 };
        }""",
        [trace_name, t],
    )
    return centre


def stored_spans(
    trace_hexes: list[str],
) -> dict[tuple[str, str], tuple[int, int, dt.datetime, float]]:
    """(trace hex, span hex) -> (pipeline id, stage id, start, duration ms), from the table."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT trace_id, span_id, pipeline_id, stage_id, start_time, duration_ns"
            " FROM spans_span WHERE trace_id = ANY(%s)",
            [[uuid.UUID(hex=text) for text in trace_hexes]],
        )
        return {
            (trace.hex, ids.span_hex(span)): (pipeline, stage, start, duration / 1e6)
            for trace, span, pipeline, stage, start, duration in cursor.fetchall()
        }


def test_clicking_a_stages_p99_point_lists_its_buckets_traces_near_that_p99(
    page, live_web, traffic
):
    # given the member on fraud-scorer's page, and a model_forward p99 point
    log_in(page, live_web, traffic.member)
    api = open_at_p99(page, live_web, traffic.fraud)
    point = telling_point(api, traffic.forward)
    step = dt.timedelta(seconds=api["step_seconds"])
    bucket_start = dt.datetime.fromisoformat(point["t"])
    bucket_end = bucket_start + step
    centre = point_centre(page, MODEL_FORWARD, point["t"])

    # when they point at it, the chart says what a click does
    page.mouse.move(centre["x"], centre["y"])
    hover = page.locator("#chart-percentiles .hoverlayer")
    hover.locator("text", has_text="click a point: traces near its p99").first.wait_for()
    cursor = page.eval_on_selector(
        "#chart-percentiles .nsewdrag", "(drag) => getComputedStyle(drag).cursor"
    )
    assert cursor == "pointer"
    assert page.inner_text("#percentiles-hint").startswith(
        "Click a point to see traces near that percentile"
    )
    page.locator("#percentiles").screenshot(path=str(ARTIFACTS / "chart-exemplars-hover.png"))

    # and click it
    with page.expect_navigation():
        page.mouse.click(centre["x"], centre["y"])
    page.wait_for_selector("#results")

    # then the traces page asks for that pipeline, stage, bucket and percentile
    assert page.url.startswith(f"{live_web.url}/traces/?")
    assert parse_qs(urlsplit(page.url).query) == {
        "pipeline": [str(traffic.fraud.pk)],
        "stage": [str(traffic.forward.pk)],
        "minute": [point["t"]],
        "step": ["15m"],
        "near": ["p99"],
    }
    heading = page.inner_text("#results h2")
    assert heading.startswith("Traces nearest the p99 of fraud-scorer (production) · model_forward")
    assert f"{bucket_start:%Y-%m-%d %H:%M}\N{EN DASH}{bucket_end:%H:%M} UTC" in heading

    # and lists model_forward spans of fraud-scorer started in the bucket, as stored
    rows = page.locator(".trace-table tbody tr").all()
    listed = [
        (
            row.get_attribute("data-trace-id") or "",
            row.get_attribute("data-span-id") or "",
            float(row.get_attribute("data-duration-ms") or "nan"),
        )
        for row in rows
    ]
    assert len(listed) == EXEMPLAR_COUNT
    stored = stored_spans([trace for trace, _, _ in listed])
    for trace, span, duration in listed:
        pipeline, stage, start, stored_ms = stored[trace, span]
        assert (pipeline, stage, stored_ms) == (traffic.fraud.pk, traffic.forward.pk, duration)
        assert bucket_start <= start < bucket_end

    # and nearest first to the bucket's exact p99, the first being that order statistic
    exact = page.request.get(
        f"{live_web.url}/api/traces/exemplars/",
        params={
            "pipeline": traffic.fraud.pk,
            "stage": traffic.forward.pk,
            "minute": point["t"],
            "step": "15m",
            "near": "p99",
        },
    ).json()
    durations = [duration for _, _, duration in listed]
    assert durations[0] == exact["quantile_ms"]
    assert durations == sorted(durations, key=lambda ms: abs(ms - exact["quantile_ms"]))
    assert f"{exact['quantile_ms']:.3f} ms" in page.inner_text("#results .summary")
    # and that exact p99 is within the sketch's bound of the plotted point: the point was
    # picked 3 bounds away from its p95 and its neighbours' p99, whose exact values lie within
    # a bound of those, so the traces of another bucket or quantile would fail here
    assert point["p99"] == pytest.approx(exact["quantile_ms"], rel=api["relative_error"])
    assert exact["n"] == point["n"]
    screenshot(page, "chart-exemplars")


def test_an_outsider_following_a_points_link_sees_none_of_its_traces(page, live_web, traffic):
    # given the link of a model_forward p99 point, as the member's page draws it
    log_in(page, live_web, traffic.member)
    api = open_at_p99(page, live_web, traffic.fraud)
    point = telling_point(api, traffic.forward)
    link = page.evaluate(
        """(t) => {
            const trace = document.getElementById("chart-percentiles").data
                .find((candidate) => candidate.name === "model_forward");
            return trace.customdata[trace.x.indexOf(t)][3];
        }""",
        point["t"],
    )
    member_page = page.goto(f"{live_web.url}{link}")
    assert member_page is not None
    assert member_page.status == 200
    their_traces = page.locator(".trace-table tbody tr").evaluate_all(
        "(rows) => rows.map((row) => row.dataset.traceId)"
    )
    assert their_traces
    page.context.clear_cookies()

    # when an outsider follows it
    log_in(page, live_web, traffic.outsider)
    response = page.goto(f"{live_web.url}{link}")

    # then there is no such pipeline for them, and nothing of it shows
    assert response is not None
    assert response.status == 404
    html = page.content()
    assert "fraud-scorer" not in html
    assert not [trace for trace in their_traces if trace in html]

"""The open pipeline page grows while you watch: spans posted to the real OTLP endpoint, folded,
published over the real Redis channel layer to the real web process, drawn in Chromium."""

from __future__ import annotations

import datetime as dt
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from django.db import connection
from django.utils import timezone

from latencyboard.live.layers import redis_channel_layers
from latencyboard.local.embedded import EmbeddedRedis, free_port
from latencyboard.pipelines.models import Pipeline
from latencyboard.rollups.services import fold_until_idle
from latencyboard.spans.models import IngestBatch
from tests.browser.conftest import PASSWORD, LiveWeb, log_in, screenshot, serve_web
from tests.factories import make_team_with_token, make_user
from tests.ingest.otlp import SpanSpec, export_request, post
from tests.support import (
    PYTHON,
    RunningProcess,
    start_process,
    start_worker,
    stop_process,
    wait_until,
)

pytestmark = pytest.mark.django_db(transaction=True)

SERVICE = "live-recommender"
STAGES = ("feature_hydration", "model_forward")


@dataclass(frozen=True)
class Ingest:
    url: str
    token: str


def start_ingest(env: dict[str, str], log: Path) -> tuple[RunningProcess, str]:
    http_port, grpc_port = free_port(), free_port()
    running = start_process(
        [PYTHON, "-m", "ingest", "--http-port", str(http_port), "--grpc-port", str(grpc_port)],
        env,
        log,
        ready_port=http_port,
    )
    return running, f"http://127.0.0.1:{http_port}/v1/traces"


def export(ingest: Ingest, requests: int, start: dt.datetime) -> None:
    """``requests`` requests (a root span and one span per stage) starting at ``start``."""
    specs = []
    start_ns = int(start.timestamp() * 1e9)
    for _ in range(requests):
        root = SpanSpec(name="predict", start_ns=start_ns, duration_ns=40_000_000)
        specs.append(root)
        specs.extend(
            SpanSpec(
                trace_id=root.trace_id,
                parent_span_id=root.span_id,
                name=stage,
                start_ns=start_ns,
                duration_ns=15_000_000,
                attributes={"inference.stage": stage},
            )
            for stage in STAGES
        )
    body = export_request(*specs, service=SERVICE).SerializeToString()
    headers = {"content-type": "application/x-protobuf", "authorization": f"Bearer {ingest.token}"}
    assert post(ingest.url, body, headers).status == 200


def wait_folded(team_id: int, timeout: float = 20) -> None:
    wait_until(
        lambda: not IngestBatch.objects.filter(team_id=team_id, rolled_up_at=None).exists(),
        timeout=timeout,
        message="the batch was never folded",
    )


def fold_elsewhere() -> None:
    """Fold (and publish, when LIVE_UPDATES is on) in another thread: Playwright keeps an event
    loop running in this one, where the channel layer's async_to_sync may not run."""

    def run() -> None:
        fold_until_idle(timezone.now, 10)
        connection.close()

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()


def minute_of(moment: dt.datetime, step: int = 60) -> str:
    """The start of the chart's step (``step`` seconds, on the epoch's grid) holding ``moment``."""
    start = dt.datetime.fromtimestamp(int(moment.timestamp()) // step * step, dt.UTC)
    return start.strftime("%Y-%m-%dT%H:%M:%S.000Z")


def drawn_counts(page: Any) -> dict[str, int]:
    """The end-to-end line's requests per minute as drawn (customdata[0] is a point's n)."""
    return page.evaluate(
        """() => {
            const chart = document.getElementById('chart-percentiles');
            const line = chart.data.find((t) => t.name === 'end-to-end');
            const iso = (x) => new Date(Date.parse(x)).toISOString();
            const drawn = line.x.map((x, i) => [iso(x), line.customdata[i][0]]);
            return Object.fromEntries(drawn.filter(([, n]) => n > 0));
        }"""
    )


def wait_for_minute(page: Any, minute: str, timeout: float = 15_000) -> None:
    """Until the step starting at ``minute`` is drawn with requests (the window's empty steps
    are drawn too, with none)."""
    page.wait_for_function(
        """(minute) => {
            const chart = document.getElementById('chart-percentiles');
            const line = (chart.data || []).find((t) => t.name === 'end-to-end');
            const iso = (x) => new Date(Date.parse(x)).toISOString();
            return line && line.x.some((x, i) => iso(x) === minute && line.customdata[i][0] > 0);
        }""",
        arg=minute,
        timeout=timeout,
    )


def point_position(page: Any, minute: str) -> dict[str, float]:
    """Where on the screen the end-to-end line's point of ``minute`` is drawn."""
    return page.evaluate(
        """(minute) => {
            const chart = document.getElementById('chart-percentiles');
            const { xaxis, yaxis } = chart._fullLayout;
            const line = chart.data.find((t) => t.name === 'end-to-end');
            const i = line.x.findIndex((x) => new Date(Date.parse(x)).toISOString() === minute);
            const plot = chart.querySelector('.nsewdrag').getBoundingClientRect();
            return { x: plot.left + xaxis.d2p(line.x[i]), y: plot.top + yaxis.d2p(line.y[i]) };
        }""",
        minute,
    )


def open_pipeline(
    page: Any, web: LiveWeb, username: str, pipeline: Pipeline, window: str = "1h"
) -> None:
    log_in(page, web, username)
    page.goto(f"{web.url}/pipelines/{pipeline.pk}/?window={window}")
    page.wait_for_selector(f"body[data-loaded='{window}']")
    page.wait_for_selector("[data-live-status=live]")
    # Set on this document: a reload would lose it.
    page.evaluate("() => { window.sameDocument = true; }")


@pytest.fixture
def live_stack(child_env: dict[str, str], tmp_path: Path) -> Iterator[Ingest]:
    """Ingest and a worker publishing live updates, on the session's Redis."""
    env = {**child_env, "LIVE_UPDATES": "true"}
    ingest, url = start_ingest(env, tmp_path / "ingest.log")
    worker = start_worker(env, tmp_path / "worker.log")
    sender = make_team_with_token()
    yield Ingest(url, sender.token)
    stop_process(worker)
    stop_process(ingest)


# Minute steps take the event's own points; coarser ones fetch the steps the event touched.
@pytest.mark.parametrize(("window", "step"), [("1h", 60), ("6h", 300)])
def test_a_posted_span_appears_on_the_open_pipeline_page_and_the_user_s_zoom_and_hover_stay(
    page, live_web, live_stack, window, step
):
    # given a pipeline with a first minute of traffic folded, open on the window
    now = dt.datetime.now(dt.UTC)
    earlier, latest = now - dt.timedelta(minutes=12), now - dt.timedelta(seconds=5)
    export(live_stack, 3, earlier)
    pipeline = Pipeline.objects.get(service_name=SERVICE)
    wait_folded(pipeline.team_id)
    member = make_user(pipeline.team, password=PASSWORD).get_username()
    open_pipeline(page, live_web, member, pipeline, window)
    assert minute_of(latest, step) not in drawn_counts(page)

    # when the user zooms, then spans of a new minute are posted to the OTLP endpoint
    zoom = [minute_of(earlier - dt.timedelta(minutes=5)), minute_of(now + dt.timedelta(minutes=6))]
    zoomed = page.evaluate(
        """async (zoom) => {
            const chart = document.getElementById('chart-percentiles');
            await Plotly.relayout(chart, {'xaxis.range': zoom});
            return chart.layout.xaxis.range;
        }""",
        zoom,
    )
    page.mouse.move(**point_position(page, minute_of(earlier, step)))
    page.wait_for_selector("#chart-percentiles .hoverlayer .legend")
    export(live_stack, 4, latest)
    wait_for_minute(page, minute_of(latest, step))

    # then the new step is drawn with its 4 requests, on the same document, in the same zoom
    screenshot(page, f"live-pipeline-new-point-{window}")
    assert drawn_counts(page) == {minute_of(earlier, step): 3, minute_of(latest, step): 4}
    assert page.evaluate("() => window.sameDocument") is True
    assert page.evaluate(
        "() => document.getElementById('chart-percentiles').layout.xaxis.range"
    ) == (zoomed)
    assert page.inner_text("[data-live-status]") == "Live"
    # and the hover label is back on the step the pointer is on (put back once the redraw
    # that brought the new step has settled)
    page.wait_for_function(
        """() => (document.querySelector('#chart-percentiles .hoverlayer')?.textContent || '')
            .includes('n = 3')""",
        # generous: in a loaded test run the redraw after the live update can be slow
        timeout=15_000,
    )


@pytest.fixture
def own_redis(settings, tmp_path: Path) -> Iterator[EmbeddedRedis]:
    """A Redis of this test only, for the web process and this process's folds to publish on,
    so that it can be stopped and started again."""
    redis = EmbeddedRedis(tmp_path / "redis", free_port(), log_path=tmp_path / "redis.log")
    redis.start()
    settings.CHANNEL_LAYERS = redis_channel_layers(redis.url)
    settings.LIVE_UPDATES = True
    yield redis
    redis.stop()


def test_with_redis_stopped_the_page_says_offline_and_after_it_returns_shows_what_it_missed(
    page, child_env, tmp_path, own_redis
):
    # given a web process and ingest on their own Redis, and the pipeline page open and live
    env = {**child_env, "REDIS_URL": own_redis.url}
    web_processes = serve_web(env, tmp_path / "web.log")
    web = next(web_processes)
    ingest_process, url = start_ingest(env, tmp_path / "ingest.log")
    try:
        sender = make_team_with_token()
        ingest = Ingest(url, sender.token)
        now = dt.datetime.now(dt.UTC)
        first, second, missed = (now - dt.timedelta(seconds=s) for s in (240, 150, 5))
        export(ingest, 2, first)
        fold_elsewhere()
        pipeline = Pipeline.objects.get(team=sender.team, service_name=SERVICE)
        open_pipeline(page, web, make_user(sender.team, password=PASSWORD).get_username(), pipeline)
        export(ingest, 3, second)
        fold_elsewhere()
        wait_for_minute(page, minute_of(second))

        # when Redis stops, spans are posted and folded meanwhile, and Redis starts again
        own_redis.stop()
        page.wait_for_selector("[data-live-status=offline]", timeout=30_000)
        screenshot(page, "live-pipeline-offline")
        export(ingest, 5, missed)
        fold_elsewhere()
        own_redis.start()

        # then the page is live again within 10 s and the minute folded meanwhile is drawn
        page.wait_for_selector("[data-live-status=live]", timeout=10_000)
        wait_for_minute(page, minute_of(missed), timeout=5_000)
        assert drawn_counts(page) == {
            minute_of(first): 2,
            minute_of(second): 3,
            minute_of(missed): 5,
        }
        assert page.evaluate("() => window.sameDocument") is True
    finally:
        stop_process(ingest_process)
        next(web_processes, None)


def test_the_overview_s_figures_follow_posted_spans_without_a_reload(page, live_web, live_stack):
    # given a pipeline with 3 requests folded, and its team's overview open on the last hour
    now = dt.datetime.now(dt.UTC)
    export(live_stack, 3, now - dt.timedelta(minutes=2))
    pipeline = Pipeline.objects.get(service_name=SERVICE)
    wait_folded(pipeline.team_id)
    log_in(page, live_web, make_user(pipeline.team, password=PASSWORD).get_username())
    page.goto(f"{live_web.url}/?window=1h")
    page.wait_for_selector("[data-live-status=live]")
    page.evaluate("() => { window.sameDocument = true; }")
    traffic = f"tr[data-pipeline='{pipeline.pk}'] [data-field=traffic]"
    before = float(page.get_attribute(traffic, "data-sort-value"))

    # when 4 more requests of a complete minute (the overview leaves the current one out) are
    # posted to the OTLP endpoint
    export(live_stack, 4, now - dt.timedelta(seconds=65))
    page.wait_for_selector("#overview[data-live-updated]", timeout=20_000)

    # then the row's traffic counts all 7, on the same document
    screenshot(page, "live-overview-updated")
    after = float(page.get_attribute(traffic, "data-sort-value"))
    assert after / before == pytest.approx(7 / 3)
    assert page.evaluate("() => window.sameDocument") is True

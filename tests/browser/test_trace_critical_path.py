"""The critical path and long durations as a user reads them on a trace's waterfall."""

from __future__ import annotations

import datetime as dt
import uuid

import pytest

from latencyboard.pipelines.models import Pipeline, Stage
from tests.browser.conftest import PASSWORD, log_in, screenshot
from tests.factories import make_team, make_user
from tests.latencyboard.test_traces import StoredSpan, store

pytestmark = pytest.mark.django_db(transaction=True)

VERMILLION = "rgb(213, 94, 0)"  # the critical path's colour (traces.css)
BLUE = "rgb(0, 114, 178)"


def store_trace(spans: list[tuple[int, int | None, str, float, float]]) -> tuple[uuid.UUID, str]:
    """Store one trace of (span id, parent, name, start ms, duration ms); return its id and
    a member's user name."""
    team = make_team("ml")
    pipeline = Pipeline.objects.create(team=team, service_name="llm-chat", environment="prod")
    trace = uuid.uuid4()
    started = (dt.datetime.now(dt.UTC) - dt.timedelta(minutes=5)).replace(microsecond=0)
    store(
        team,
        [
            StoredSpan(
                trace=trace,
                span_id=span_id,
                parent=parent,
                stage=Stage.objects.get_or_create(pipeline=pipeline, name=name)[0],
                start=started + dt.timedelta(milliseconds=start),
                ms=ms,
            )
            for span_id, parent, name, start, ms in spans
        ],
    )
    return trace, make_user(team, password=PASSWORD).get_username()


def waterfall(page) -> dict[str, dict[str, str]]:
    """Per span name, what its row shows: class, bar colour, badges and figures."""
    return page.evaluate(
        """() => Object.fromEntries([...document.querySelectorAll('.wf-span')].map((row) => [
            row.dataset.name,
            {
              critical: String(row.classList.contains('critical')),
              bar: getComputedStyle(row.querySelector('.wf-bar')).backgroundColor,
              badges: [...row.querySelectorAll('.badge')].map((b) => b.innerText).join(','),
              total: row.querySelector('.wf-total').innerText,
              on_path: row.querySelector('.wf-critical').innerText,
            },
        ]))"""
    )


def test_a_slow_model_forward_is_drawn_as_the_critical_path(page, live_web):
    # given a 37.75 s request whose model_forward took 37,742 ms, its six stages one after
    # the other, serialize (0.45 ms) the last
    trace, member = store_trace(
        [
            (1, None, "POST /chat", 0, 37_751.498),
            (2, 1, "queue_wait", 0.3, 1.2),
            (3, 1, "feature_hydration", 1.5, 4.8),
            (4, 1, "preprocess", 6.3, 1.5),
            (5, 1, "model_forward", 7.8, 37_742.0),
            (6, 1, "postprocess", 37_749.8, 0.9),
            (7, 1, "serialize", 37_750.7, 0.45),
        ]
    )
    log_in(page, live_web, member)

    # when they open its waterfall
    page.goto(f"{live_web.url}/traces/{trace.hex}/")
    page.wait_for_selector(".wf-span")

    # then every stage is marked on the critical path, in vermillion, model_forward with
    # 37.74 s of it; durations read in seconds, the time axis too
    rows = waterfall(page)
    assert rows["model_forward"] == {
        "critical": "true",
        "bar": VERMILLION,
        "badges": "critical path",
        "total": "37.74 s",
        "on_path": "37.74 s",
    }
    assert [name for name, row in rows.items() if row["critical"] == "true"] == list(rows)
    assert rows["serialize"]["on_path"] == "450 µs"
    # 0.3 ms before queue_wait and 0.348 ms after serialize
    assert rows["POST /chat"]["on_path"] == "648 µs"
    assert page.inner_text("#trace-duration") == "37.75 s"
    assert page.inner_text(".wf-header .wf-name") == "Span (time axis in s)"
    assert page.locator(".wf-tick").all_inner_texts() == ["0", "10", "20", "30"]
    screenshot(page, "trace-critical-path-slow-model")


def test_of_parallel_children_the_one_that_gates_the_end_is_on_the_path(page, live_web):
    # given a request that hydrates features from two stores in parallel (the cache answers
    # first), then runs the model
    trace, member = store_trace(
        [
            (1, None, "POST /score", 0, 100),
            (2, 1, "cache GET", 2, 10),
            (3, 1, "feature store GET", 2, 40),
            (4, 1, "model_forward", 42, 55),
        ]
    )
    log_in(page, live_web, member)

    # when they open its waterfall
    page.goto(f"{live_web.url}/traces/{trace.hex}/")
    page.wait_for_selector(".wf-span")

    # then the feature store and the model are on the path, the cache is not
    rows = waterfall(page)
    assert {name: row["critical"] for name, row in rows.items()} == {
        "POST /score": "true",
        "cache GET": "false",
        "feature store GET": "true",
        "model_forward": "true",
    }
    cache = rows["cache GET"]
    assert (cache["bar"], cache["badges"], cache["on_path"]) == (BLUE, "", "\N{EN DASH}")
    assert rows["feature store GET"]["on_path"] == "40.0 ms"
    assert rows["POST /score"]["on_path"] == "5.00 ms"  # 2 ms before, 3 ms after the model
    screenshot(page, "trace-critical-path-parallel")

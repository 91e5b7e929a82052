"""The compare page in a real browser: v7 against v8 of the demo's fraud-scorer, first with a
regression injected into v8's model_forward, then without: the verdict must flip."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pytest
from playwright.sync_api import expect

from latencyboard.demo.profiles import FORWARD_INDEX, FRAUD_SCORER, STAGE_NAMES, sample_requests
from latencyboard.pipelines.models import Pipeline, Stage
from tests.browser.conftest import PASSWORD, log_in, screenshot
from tests.factories import make_team, make_user
from tests.latencyboard.test_compare import write_spans

pytestmark = pytest.mark.django_db(transaction=True)

REGRESSION_DAY = dt.datetime(2026, 3, 2, tzinfo=dt.UTC)
CLEAN_DAY = REGRESSION_DAY + dt.timedelta(days=1)
REQUESTS_PER_VERSION = 3_000
SLOWDOWN = 1.35  # what v8 does to model_forward in the demo


def write_versions(pipeline: Pipeline, day: dt.datetime, forward_factor: float, seed: int) -> None:
    """An hour of fraud-scorer traffic from ``day``: v7 and v8 requests drawn alike from the
    demo's profile, then v8's model_forward times ``forward_factor``. As in the demo, the
    root span and model_forward carry ``model.version``; the other stages do not."""
    stages = {stage.name: stage for stage in pipeline.stages.all()}
    rng = np.random.default_rng(seed)
    step = dt.timedelta(hours=1) / REQUESTS_PER_VERSION
    for offset, version, factor in ((0, "v7", 1.0), (1, "v8", forward_factor)):
        batch = sample_requests(FRAUD_SCORER, REQUESTS_PER_VERSION, rng)
        durations = batch.stage_ns / 1e6
        durations[:, FORWARD_INDEX] *= factor
        start = day + offset * step / 2
        tagged = {"model.version": version}
        roots = durations.sum(axis=1) + batch.gap_ns.sum(axis=1) / 1e6
        write_spans(
            stages[FRAUD_SCORER.root_name], roots, start, step, is_root=True, attributes=tagged
        )
        for index, name in enumerate(STAGE_NAMES):
            ran = batch.ran[:, index]
            write_spans(
                stages[name],
                durations[ran, index],
                start,
                step,
                attributes=tagged if index == FORWARD_INDEX else {},
                seed=seed * 100 + offset * 10 + index,
            )


def compare_versions(page, day: dt.datetime) -> None:
    page.fill("input[name=start]", day.strftime("%Y-%m-%dT%H:%M"))
    page.fill("input[name=end]", (day + dt.timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M"))
    page.fill("input[name=attr]", "model.version")
    page.fill("input[name=a]", "v7")
    page.fill("input[name=b]", "v8")
    page.click("#compare-form button[type=submit]")


def test_the_verdict_names_an_injected_regression_and_flips_without_it(page, live_web):
    # given the demo pipeline with v7 and v8 traffic on two days: v8's model_forward 35%
    # slower on the first, exactly like v7 on the second
    team = make_team("ours")
    pipeline = Pipeline.objects.create(
        team=team, service_name=FRAUD_SCORER.name, environment="production"
    )
    for name in (FRAUD_SCORER.root_name, *STAGE_NAMES):
        Stage.objects.create(pipeline=pipeline, name=name)
    write_versions(pipeline, REGRESSION_DAY, SLOWDOWN, seed=1)
    write_versions(pipeline, CLEAN_DAY, 1.0, seed=2)
    member = make_user(team, password=PASSWORD)

    # when the member compares v7 with v8 on the first day
    log_in(page, live_web, member.get_username())
    page.goto(f"{live_web.url}/compare/")
    page.select_option("#pipeline", str(pipeline.pk))
    page.click("#mode-picker button[data-mode=attribute]")
    compare_versions(page, REGRESSION_DAY)

    # then model_forward is named significantly slower, in its row and in the headline
    forward = page.locator('#verdicts tbody tr[data-stage="model_forward"] td.verdict')
    expect(forward).to_contain_text("significantly slower")
    expect(forward).to_contain_text("model_forward p")
    expect(page.locator("#headline")).to_contain_text("Significantly slower in B")
    expect(page.locator("#headline")).to_contain_text("model_forward")
    expect(page.locator("#chart-compare .main-svg").first).to_be_visible()
    assert "ms" in page.inner_text("#chart-compare")
    screenshot(page, "compare")

    # and when the same comparison runs on the day without the regression
    compare_versions(page, CLEAN_DAY)

    # then the verdict flips to no significant change
    expect(forward).to_have_text("no significant change")
    expect(page.locator("#headline")).not_to_contain_text("model_forward")
    screenshot(page, "compare-no-regression")

    # and the page's URL holds the comparison: reloading it runs it again
    page.reload()
    expect(forward).to_have_text("no significant change")


def test_two_windows_show_every_stage(page, live_web):
    # given the demo pipeline's traffic on two days, v8's model_forward slower on the second
    team = make_team("ours")
    pipeline = Pipeline.objects.create(
        team=team, service_name=FRAUD_SCORER.name, environment="production"
    )
    for name in (FRAUD_SCORER.root_name, *STAGE_NAMES):
        Stage.objects.create(pipeline=pipeline, name=name)
    write_versions(pipeline, REGRESSION_DAY, 1.0, seed=3)
    write_versions(pipeline, CLEAN_DAY, SLOWDOWN, seed=4)
    member = make_user(team, password=PASSWORD)
    hour = dt.timedelta(hours=1)

    # when the member opens a link comparing the two hours
    log_in(page, live_web, member.get_username())
    query = (
        f"pipeline={pipeline.pk}&a_start={REGRESSION_DAY:%Y-%m-%dT%H:%MZ}"
        f"&a_end={REGRESSION_DAY + hour:%Y-%m-%dT%H:%MZ}&b_start={CLEAN_DAY:%Y-%m-%dT%H:%MZ}"
        f"&b_end={CLEAN_DAY + hour:%Y-%m-%dT%H:%MZ}"
    )
    page.goto(f"{live_web.url}/compare/?{query}")

    # then every stage has a row, end to end first, and only model_forward changed
    rows = page.locator("#verdicts tbody tr")
    expect(rows).to_have_count(1 + len(STAGE_NAMES))
    assert rows.first.get_attribute("data-stage") == "end-to-end"
    forward = page.locator('#verdicts tbody tr[data-stage="model_forward"] td.verdict')
    expect(forward).to_contain_text("significantly slower")
    for name in ("queue_wait", "preprocess", "postprocess", "serialize"):
        row = page.locator(f'#verdicts tbody tr[data-stage="{name}"] td.verdict')
        expect(row).to_have_text("no significant change")

    # and the method is spelled out, with the spans each quantile needs
    page.click(".method summary")
    expect(page.locator(".method")).to_contain_text("1,000 spans (p99)")
    screenshot(page, "compare-windows")

    # and a window that ends before it starts is refused with the API's words, on its field
    page.fill("input[name=a_end]", (REGRESSION_DAY - hour).strftime("%Y-%m-%dT%H:%M"))
    page.click("#compare-form button[type=submit]")
    expect(page.locator("#form-errors")).to_have_text("a_end: Must be after the window's start.")
    expect(page.locator("input[name=a_end]")).to_have_attribute("aria-invalid", "true")


def test_times_read_in_24_hour_utc_whatever_the_browsers_locale(browser, live_web):
    # given a member whose browser speaks American English, with its 12-hour clock
    team = make_team("ours")
    pipeline = Pipeline.objects.create(team=team, service_name="fraud-scorer")
    member = make_user(team, password=PASSWORD)
    context = browser.new_context(locale="en-US", timezone_id="America/New_York")
    page = context.new_page()
    log_in(page, live_web, member.get_username())

    # when they open a comparison of two afternoon hours
    query = f"pipeline={pipeline.pk}&a_start=2026-03-02T13:00Z&a_end=2026-03-02T14:00Z"
    page.goto(f"{live_web.url}/compare/?{query}&b_start=2026-03-02T14:00Z&b_end=2026-03-02T15:00Z")

    # then the fields show the UTC times on a 24-hour clock, and the chart says there is
    # nothing to compare
    fields = ["a_start", "a_end", "b_start", "b_end"]
    shown = [page.input_value(f"input[name={name}]") for name in fields]
    assert shown == ["2026-03-02 13:00", "2026-03-02 14:00", "2026-03-02 14:00", "2026-03-02 15:00"]
    expect(page.locator("#chart-compare")).to_have_text(
        "No spans of this pipeline in either side: nothing to compare. Check the times (UTC) "
        "and, for attribute values, their spelling."
    )
    screenshot(page, "compare-24-hour")
    context.close()

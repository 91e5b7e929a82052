"""Names in the data (stages, pipelines, attribute values) come from the spans teams send:
a name holding link markup is drawn as the text it is, never as a link Plotly would make."""

from __future__ import annotations

import pytest

from latencyboard.pipelines.models import Stage
from tests.browser.conftest import log_in, screenshot
from tests.browser.test_dashboards import Demo, demo, open_pipeline  # noqa: F401 - fixture

pytestmark = pytest.mark.django_db(transaction=True)

LINK = '<a href="https://evil.example/">open me</a>'


def test_a_stage_named_with_a_link_is_drawn_as_text_in_every_chart(
    page,
    live_web,
    demo: Demo,  # noqa: F811 - the fixture
):
    # given a stage whose name (as sent in the spans) is link markup
    Stage.objects.filter(pipeline=demo.fraud, name="model_forward").update(name=LINK)
    log_in(page, live_web, demo.member)

    # when the member opens the pipeline, and its charts are drawn
    open_pipeline(page, live_web, demo.fraud)
    page.wait_for_function(
        "() => ['chart-percentiles', 'chart-breakdown', 'chart-shares'].every("
        "(id) => document.getElementById(id).querySelector('.main-svg'))"
    )
    screenshot(page, "chart-links")

    # then no chart holds a link, and the legend shows the name as written
    assert page.locator(".js-plotly-plot svg a").count() == 0
    assert page.locator("#chart-percentiles .legendtext", has_text=LINK).count() == 1

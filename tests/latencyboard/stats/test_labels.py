"""Tests for latencyboard.stats.labels: the one name of a quantile pages, alerts, compare and
reports show, and the Prometheus label value that differs from it on purpose."""

from __future__ import annotations

import pytest
from django.template import Context, Template

from latencyboard.prometheus.series import quantile_label_value
from latencyboard.stats.labels import quantile_label


@pytest.mark.parametrize(
    ("q", "label"),
    [
        pytest.param(0.5, "p50", id="median"),
        pytest.param(0.99, "p99", id="p99"),
        pytest.param(0.995, "p99.5", id="half"),
        pytest.param(0.999, "p99.9", id="three-nines"),
        pytest.param(0.9999, "p99.99", id="four-nines"),
        pytest.param(0.07, "p7", id="float-noise"),
    ],
)
def test_a_quantile_is_shown_as_its_percentage(q: float, label: str) -> None:
    assert quantile_label(q) == label


def test_a_page_shows_a_quantile_as_compare_and_alerts_do() -> None:
    # given a page that names an objective's quantile through the template filter
    page = Template("{% load dashboards %}{{ q|quantile_label }}").render(Context({"q": 0.999}))

    # then it reads as the one label, where Prometheus' quantile label is the level itself
    assert (page, quantile_label_value(0.999)) == ("p99.9", "0.999")

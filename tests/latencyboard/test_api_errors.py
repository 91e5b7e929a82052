"""Every error under ``/api/`` is JSON, whoever asks and however: a script reading the API
never has to parse a page of HTML (nor, with DEBUG on, Django's list of URL patterns)."""

from __future__ import annotations

from collections import defaultdict

import pytest
from django.test import Client

from tests.factories import make_team
from tests.latencyboard.test_outsider import METHODS, http_routes
from tests.latencyboard.test_sla import member

pytestmark = pytest.mark.django_db

VALUES = {
    "pipeline_id": "1",
    "objective_id": "1",
    "window_id": "1",
    "trace_id": "0" * 32,
    "token_id": "1",
    "rule_id": "1",
    "channel_id": "1",
    "alert_id": "1",
    "report_id": "1",
    "file_name": "x.csv",
}


def api_paths() -> list[str]:
    # Any other id a route names (routes are added often) is 1 as well.
    values = defaultdict(lambda: "1", VALUES)
    routes = {"/" + r.fill(values) for r in http_routes() if r.path.startswith("api/")}
    return sorted(routes | {"/api/", "/api/no/such/thing/", "/api/pipelines/abc/percentiles/"})


@pytest.mark.parametrize(
    ("signed_in", "some_statuses"),
    [(False, {401, 404, 405}), (True, {404, 405})],
    ids=["anonymous", "member"],
)
def test_every_api_error_is_json(signed_in, some_statuses):
    # given an anonymous visitor, or a member of a team that owns none of the ids asked for
    client = Client()
    if signed_in:
        client.force_login(member(make_team()))

    # when they send every method to every route under /api/
    answers = [
        (path, method, getattr(client, method)(path, {}, content_type="application/json"))
        for path in api_paths()
        for method in METHODS
    ]

    # then every error (401, 403, 404, 405, …) is JSON
    not_json = [
        (path, method, r.status_code, r["Content-Type"])
        for path, method, r in answers
        if r.status_code >= 400 and r["Content-Type"] != "application/json"
    ]
    assert not_json == []
    assert some_statuses <= {r.status_code for _, _, r in answers}

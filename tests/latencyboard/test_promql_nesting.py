"""Deeply nested PromQL under the 4,096-character cap, as an attacker sends it: every answer is
Prometheus' JSON error shape or a correct value, never a 500. Long flat operator chains are
answered (they are parsed without recursion); nesting of parentheses and calls is bounded."""

from __future__ import annotations

from typing import cast

import pytest
from django.contrib.auth.models import User
from django.test import Client
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from latencyboard.apitokens.models import Scope
from latencyboard.apitokens.services import issue_api_token
from latencyboard.pipelines.models import Pipeline
from latencyboard.prometheus.promql import MAX_NESTING, MAX_QUERY_LENGTH
from tests.factories import make_team, make_user

pytestmark = pytest.mark.django_db

ENDPOINTS = ("query", "query_range")
RANGE = {"start": "0", "end": "3600", "step": "60"}
NESTED = {
    "1,500 nested parentheses": "(" * 1500 + "1" + ")" * 1500,
    "nested parentheses around a selector": "(" * 2000 + "latencyboard_requests" + ")" * 2000,
    "deeply nested function calls": "abs(" * 800 + "latencyboard_requests" + ")" * 800,
    "nested unary minus": "-(" * 1300 + "1" + ")" * 1300,
    "unclosed nesting": "(" * 4000,
}


@pytest.fixture
def grafana() -> Client:
    """A team member's read-only API token, sent alone as Grafana sends it."""
    team = make_team()
    Pipeline.objects.create(team=team, service_name="scorer")
    issued = issue_api_token(cast(User, make_user(team)), "grafana", Scope.READ)
    return Client(HTTP_AUTHORIZATION=f"Bearer {issued.plaintext}")


def ask(client: Client, endpoint: str, query: str):
    return client.get(f"/prometheus/api/v1/{endpoint}", {"query": query, **RANGE})


@pytest.mark.parametrize("endpoint", ENDPOINTS)
@pytest.mark.parametrize("query", NESTED.values(), ids=NESTED.keys())
def test_deep_nesting_is_a_400_in_prometheus_shape(grafana, endpoint, query):
    response = ask(grafana, endpoint, query)

    assert response.status_code == 400
    assert response.json() == {
        "status": "error",
        "errorType": "bad_data",
        "error": f"The query nests parentheses deeper than {MAX_NESTING} levels.",
    }


FLAT = {
    "2,048-term sum": ("+".join(["1"] * 2048), "2048.0"),
    "unary minus chain": ("-" * 4001 + "1", "-1.0"),
    "alternating chain": ("1" + "-1+1" * 1000, "1.0"),
    "precedence": ("1+2*3-4/2", "5.0"),
    "left to right": ("8/4/2-1-1", "-1.0"),
    "parentheses first": ("(1+2)*-3", "-9.0"),
    "division by zero": ("1/0", "+Inf"),
    "nesting at the bound": ("(" * MAX_NESTING + "2*3" + ")" * MAX_NESTING, "6.0"),
}


@pytest.mark.parametrize(("query", "value"), FLAT.values(), ids=FLAT.keys())
def test_long_flat_arithmetic_is_answered_correctly(grafana, query, value):
    response = ask(grafana, "query", query)

    assert response.status_code == 200
    assert response.json()["data"]["resultType"] == "scalar"
    assert response.json()["data"]["result"][1] == value


PIECES = st.sampled_from(
    [
        "(",
        ")",
        "{",
        "}",
        "[",
        "]",
        ",",
        "+",
        "-",
        "*",
        "/",
        "%",
        "^",
        "==",
        "!=",
        "=~",
        "!~",
        "=",
        "<",
        ">",
        "@",
        " ",
        "1",
        "0x1f",
        "1e3",
        ".5",
        "Inf",
        "NaN",
        "5m",
        "latencyboard_requests",
        "latencyboard_latency_seconds",
        "rate",
        "sum",
        "by",
        "without",
        "offset",
        "or",
        "and",
        "unless",
        "bool",
        "on",
        "ignoring",
        "stage",
        "quantile",
        '"',
        "'",
        "`",
        '"p99"',
        '"a.*"',
        "\\",
        "#",
        "\n",
        "é",
        "\x00",
    ]
)
NESTED_PIECES = st.builds(
    lambda opening, depth, inner: opening * depth + inner + ")" * depth,
    st.sampled_from(["(", "-(", "abs(", "sum by (stage) (", "rate("]),
    st.integers(0, 2000),
    PIECES,
)
CHAINS = st.builds(
    lambda term, op, terms: op.join([term] * terms),
    st.sampled_from(["1", "-1", ".5e1", "(2)", "latencyboard_requests", "0x1f"]),
    st.sampled_from(["+", "-", "*", "/", " or ", "^", "=="]),
    st.integers(1, 2048),
)
QUERIES = st.one_of(
    st.lists(PIECES, max_size=400).map("".join),
    st.text(max_size=300),
    NESTED_PIECES,
    CHAINS,
).map(lambda query: query[:MAX_QUERY_LENGTH])


@settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(query=QUERIES, endpoint=st.sampled_from(ENDPOINTS))
@example(query=NESTED["1,500 nested parentheses"], endpoint="query")  # what the attacker sent
@example(query=FLAT["2,048-term sum"][0], endpoint="query_range")
def test_promql_ish_strings_never_get_a_server_error(grafana, query, endpoint):
    response = ask(grafana, endpoint, query)

    assert response.status_code in (200, 400)
    body = response.json()
    assert body["status"] == ("success" if response.status_code == 200 else "error")

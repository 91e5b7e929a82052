"""The real GenAI instrumentation libraries, as an application uses them: the ``openai`` client
calling an OpenAI-compatible server of the tests' own on loopback (one plain and one streamed
chat completion), instrumented by ``opentelemetry-instrumentation-openai-v2``,
``openinference-instrumentation-openai`` or Traceloop's ``opentelemetry-instrumentation-openai``,
exporting through the SDK's OTLP/HTTP exporter to the ingest process. What a user checks: the
spans arrive in the application's pipeline with their token counts, and the trace API shows
the events the library recorded."""

from __future__ import annotations

import datetime as dt
import os
import subprocess
import sys
from collections.abc import Iterator
from typing import Any, cast

import pytest
from django.contrib.auth.models import User
from django.test import Client

from latencyboard.pipelines.models import Pipeline
from latencyboard.rollups import services as rollup_services
from latencyboard.spans.models import Span
from tests.factories import TeamWithToken, make_team_with_token, make_user
from tests.ingest.genai_client import LIBRARIES
from tests.ingest.openai_server import ANSWER, PROMPT_TOKENS, Server, openai_server
from tests.support import ROOT

pytestmark = pytest.mark.django_db(transaction=True)

# Where each library puts the token counts (OTel GenAI semantic conventions, new names;
# OpenInference's own).
TOKENS = {
    "openai-v2": ("gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens"),
    "openinference": ("llm.token_count.prompt", "llm.token_count.completion"),
    "traceloop": ("gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens"),
}
# The events a library records on a streamed completion's span.
STREAM_EVENTS = {
    "openai-v2": set(),
    "openinference": {"First Token Stream Event"},
    "traceloop": {"gen_ai.content.completion.chunk"},
}


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    with openai_server() as running:
        yield running


def run_application(library: str, server: Server, traces_url: str, token: str) -> None:
    """The instrumented application, in a process of its own (see genai_client)."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("OTEL_")}
    env.update(
        OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=traces_url,
        OTEL_EXPORTER_OTLP_TRACES_HEADERS=f"authorization=Bearer {token}",
    )
    done = subprocess.run(
        [sys.executable, "-m", "tests.ingest.genai_client", library, server.url],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr


def _trace(client: Client, span: Span) -> dict[str, Any]:
    return cast(dict[str, Any], client.get(f"/api/traces/{span.trace_id.hex}/").json())


@pytest.mark.parametrize("library", LIBRARIES)
def test_a_libraries_spans_arrive_with_tokens_and_events(
    library: str, server: Server, ingest_server
):
    # given a team, and an application of it instrumented by the library
    tenant: TeamWithToken = make_team_with_token()
    client = Client()
    client.force_login(cast(User, make_user(tenant.team)))

    # when it makes one plain and one streamed chat completion
    run_application(library, server, ingest_server.traces_url, tenant.token)

    # then both calls' spans are in the application's pipeline
    pipeline = Pipeline.objects.get(team=tenant.team)
    assert pipeline.service_name == f"chat-{library}"
    spans = list(Span.objects.filter(pipeline=pipeline).order_by("start_time"))
    assert len(spans) == 2
    # and the trace API shows each with its token counts, and the stream's events
    prompt_key, output_key = TOKENS[library]
    plain, streamed = (_trace(client, span)["spans"][0] for span in spans)
    for shown in (plain, streamed):
        assert shown["attributes"][prompt_key] == PROMPT_TOKENS
        assert shown["attributes"][output_key] == len(ANSWER)
    assert plain["events"] == []
    assert {event["name"] for event in streamed["events"]} == STREAM_EVENTS[library]
    for event in streamed["events"]:
        assert streamed["offset_ms"] <= event["offset_ms"]
        assert event["offset_ms"] <= streamed["offset_ms"] + streamed["duration_ms"]
    # and once folded, the percentiles API has the calls' stage with both requests counted
    rollup_services.fold_until_idle(lambda: dt.datetime.now(dt.UTC), seconds=120)
    body = client.get(
        f"/api/pipelines/{pipeline.pk}/percentiles/",
        {"stages": str(spans[0].stage_id), "window": "1h"},
    ).json()
    (series,) = body["series"]
    assert series["stage"]["name"] == plain["stage"]
    assert series["summary"]["n"] == 2

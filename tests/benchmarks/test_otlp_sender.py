"""The ingest benchmark's sender against the live ingest server: refused exports come back."""

from __future__ import annotations

import random
import time

import numpy as np
import pytest
from _otlp_bodies import SPANS_PER_REQUEST, BodyTemplate
from _otlp_sender import Connection, Tally, Timeline, export

from latencyboard.spans.models import Span
from tests.factories import make_team_with_token

pytestmark = pytest.mark.django_db(transaction=True)


def test_refused_exports_are_sent_again_after_retry_after_and_counted_once(ingest_server):
    # given a team allowed 512 spans/s, a burst of two of the benchmark's 512-span exports
    tenant = make_team_with_token(rate_limit=SPANS_PER_REQUEST)
    conn = Connection(ingest_server.http_port, tenant.token)
    template = BodyTemplate(random.Random(1), time.time_ns())
    rng = np.random.default_rng(1)
    now = time.time()
    tally = Tally()

    # when the sender exports four distinct bodies back to back, well inside its window
    for _ in range(4):
        export(conn, template.render(rng), Timeline(now, now, now + 60), tally)
    conn.close()

    # then the server refused some, each refusal was followed by the same body again, and
    # every span was acknowledged once and stored once
    refused = tally.statuses["measured:429"]
    assert refused >= 1
    assert (tally.retries, tally.abandoned) == (refused, 0)
    assert tally.statuses["measured:200"] == 4
    assert tally.accepted == {"measured": 4 * SPANS_PER_REQUEST}
    assert Span.objects.filter(team_id=tenant.team.id).count() == 4 * SPANS_PER_REQUEST

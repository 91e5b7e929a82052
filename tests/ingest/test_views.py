"""The web app's OTLP/HTTP route (``POST /v1/traces`` of Django): what it answers before a body."""

from __future__ import annotations

import pytest
from django.conf import settings

pytestmark = pytest.mark.django_db(transaction=True)


def test_anonymous_body_past_the_cap_is_401_not_413(client):
    # given no token and a body one byte past the cap: the token is checked from the headers,
    # so the body is never read
    body = bytes(settings.INGEST_MAX_BODY_BYTES + 1)

    response = client.post("/v1/traces", body, content_type="application/x-protobuf")

    assert response.status_code == 401

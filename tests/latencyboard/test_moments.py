"""The API's one timestamp format."""

from __future__ import annotations

import datetime as dt
import zoneinfo

import pytest
from rest_framework import serializers

from latencyboard.moments import iso_utc

PARIS = zoneinfo.ZoneInfo("Europe/Paris")


@pytest.mark.parametrize(
    ("moment", "text"),
    [
        pytest.param(
            dt.datetime(2026, 11, 24, 10, 41, tzinfo=dt.UTC), "2026-11-24T10:41:00Z", id="whole"
        ),
        pytest.param(
            dt.datetime(2026, 11, 24, 10, 41, 0, 250_000, tzinfo=dt.UTC),
            "2026-11-24T10:41:00.250000Z",
            id="microseconds",
        ),
        pytest.param(
            dt.datetime(2026, 11, 24, 11, 41, tzinfo=PARIS), "2026-11-24T10:41:00Z", id="offset"
        ),
    ],
)
def test_a_moment_is_written_in_utc_with_z_and_a_fraction_only_when_it_has_one(moment, text):
    assert iso_utc(moment) == text


@pytest.mark.parametrize(
    "moment",
    [
        pytest.param(dt.datetime(2026, 11, 24, 10, 41, tzinfo=dt.UTC), id="whole"),
        pytest.param(dt.datetime(2026, 11, 24, 10, 41, 0, 7, tzinfo=dt.UTC), id="microseconds"),
    ],
)
def test_hand_written_moments_match_what_serializers_write(moment, settings):
    settings.TIME_ZONE = "UTC"

    assert iso_utc(moment) == serializers.DateTimeField().to_representation(moment)

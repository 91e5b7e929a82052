"""Static files as the tests' web serves them (sources, not collected): the favicon, every page's
icon link, and the partial Plotly bundle next to the full one."""

from __future__ import annotations

import re
from pathlib import Path

import plotly
import pytest

from tests.support import ROOT

PLOTLY_VERSION = re.compile(rb"plotly\.js (?:\(basic - minified\) )?v(\d+\.\d+\.\d+)")


def test_favicon_ico_is_served_at_the_root(client):
    response = client.get("/favicon.ico")

    body = b"".join(response.streaming_content)
    assert response.status_code == 200
    assert response["Content-Type"] == "image/x-icon"
    assert body[:4] == b"\x00\x00\x01\x00", "an ICO file"


@pytest.mark.django_db
def test_every_page_links_an_svg_icon_that_is_served(client):
    page = client.get("/login/").content.decode()
    href = re.search(r'<link rel="icon" href="([^"]+)" type="image/svg\+xml">', page)
    assert href is not None

    response = client.get(href.group(1))

    assert response.status_code == 200
    assert response["Content-Type"] == "image/svg+xml"


def test_partial_plotly_bundle_is_the_version_of_the_full_one():
    """Charts draw alike on every page only while both bundles are one plotly.js release:
    after upgrading the plotly package, vendor the same release of plotly.js-basic-dist-min."""
    full = Path(plotly.__file__).parent / "package_data" / "plotly.min.js"
    basic = ROOT / "static" / "vendor" / "plotly-basic.min.js"

    full_version = PLOTLY_VERSION.search(full.read_bytes()[:300])
    basic_version = PLOTLY_VERSION.search(basic.read_bytes()[:300])

    assert full_version is not None
    assert basic_version is not None
    assert basic_version.group(1) == full_version.group(1)

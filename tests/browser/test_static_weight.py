"""What the pages weigh over the wire under `make run`'s static set-up (collected, hashed,
precompressed, served by WhiteNoise), and the API docs with no network beyond this server."""

from __future__ import annotations

import gzip
import json
import urllib.request
from collections.abc import Iterator
from email.message import Message
from pathlib import Path
from urllib.parse import urlsplit

import brotli
import plotly
import pytest

from latencyboard.local.runner import collect_static
from latencyboard.pipelines.models import Pipeline
from tests.browser.conftest import LiveWeb, log_in, screenshot, serve_web
from tests.browser.test_overview import Demo, demo  # noqa: F401 - the fixture
from tests.support import ROOT

pytestmark = pytest.mark.django_db(transaction=True)

FIRST_LOAD_BUDGET = 1_500_000
REPEAT_LOAD_BUDGET = 200_000
A_YEAR_AND_MORE = "max-age=315360000, public, immutable"


@pytest.fixture(scope="module")
def static_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("var") / "static"


@pytest.fixture(scope="module")
def made_run_web(
    child_env: dict[str, str], static_root: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LiveWeb]:
    """The web app with the static files collected as `make run` collects them."""
    env = dict(child_env)
    log = tmp_path_factory.mktemp("collectstatic") / "collectstatic.log"
    assert collect_static(env, static_root.parent, log).wait() == 0, log.read_text()
    yield from serve_web(env, tmp_path_factory.mktemp("web") / "web.log")


@pytest.fixture
def fraud_member(demo: Demo) -> tuple[Pipeline, str]:  # noqa: F811
    """A day of demo traffic at a few requests a minute, folded (tests/browser/
    test_overview.py's); a member of its team."""
    return Pipeline.objects.get(team=demo.team, service_name="fraud-scorer"), demo.member


def hashed_url(static_root: Path, name: str) -> str:
    manifest = json.loads((static_root / "staticfiles.json").read_text())
    return f"/static/{manifest['paths'][name]}"


def fetch(url: str, accept_encoding: str) -> tuple[Message, bytes]:
    request = urllib.request.Request(url, headers={"Accept-Encoding": accept_encoding})  # noqa: S310
    with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310
        return response.headers, response.read()


@pytest.mark.parametrize(
    ("name", "source"),
    [
        ("vendor/plotly-basic.min.js", ROOT / "static" / "vendor" / "plotly-basic.min.js"),
        ("vendor/plotly.min.js", Path(plotly.__file__).parent / "package_data" / "plotly.min.js"),
    ],
    ids=["plotly-basic", "plotly-full"],
)
@pytest.mark.parametrize(
    ("accept", "decode"),
    [("gzip", gzip.decompress), ("br", brotli.decompress)],
    ids=["gzip", "brotli"],
)
def test_collected_plotly_is_compressed_and_cached_for_good(
    made_run_web, static_root, name, source, accept, decode
):
    headers, body = fetch(made_run_web.url + hashed_url(static_root, name), accept)

    assert headers["Content-Encoding"] == accept
    assert headers["Cache-Control"] == A_YEAR_AND_MORE
    assert decode(body) == source.read_bytes()


def test_pipeline_page_weighs_little_first_and_almost_nothing_again(
    browser, made_run_web, fraud_member
):
    """Bytes on the wire (headers included) as Chromium's network log counts them."""
    fraud, member = fraud_member
    login = browser.new_context()
    log_in(login.new_page(), made_run_web, member)
    context = browser.new_context(viewport={"width": 1400, "height": 900})  # an empty cache
    context.add_cookies(login.cookies())
    login.close()
    page = context.new_page()
    cdp = context.new_cdp_session(page)
    cdp.send("Network.enable")
    received: list[int] = []
    cdp.on("Network.loadingFinished", lambda event: received.append(event["encodedDataLength"]))
    responses: list = []
    page.on("response", lambda response: responses.append(response))
    url = f"{made_run_web.url}/pipelines/{fraud.pk}/"

    page.goto(url)
    page.wait_for_selector("body[data-loaded]:not(.loading)")
    page.wait_for_load_state("networkidle")
    first = sum(received)
    received.clear()
    page.goto(url)
    page.wait_for_selector("body[data-loaded]:not(.loading)")
    page.wait_for_load_state("networkidle")
    repeat = sum(received)
    statics = [
        (r.url, r.status, r.header_value("cache-control")) for r in responses if "/static/" in r.url
    ]
    context.close()

    print(f"pipeline page over the wire: first {first} B, repeat {repeat} B")
    assert statics, "the page loads static files"
    assert [s for s in statics if s[1:] != (200, A_YEAR_AND_MORE)] == []
    assert first <= FIRST_LOAD_BUDGET, f"first load {first} B"
    assert repeat <= REPEAT_LOAD_BUDGET, f"repeat load {repeat} B"


def test_api_docs_list_every_operation_with_no_network(page, made_run_web):
    schema = json.loads(fetch(f"{made_run_web.url}/api/schema/?format=json", "identity")[1])
    operations = {
        operation["operationId"]
        for methods in schema["paths"].values()
        for operation in methods.values()
    }
    elsewhere: list[str] = []

    def local_only(route) -> None:
        if urlsplit(route.request.url).hostname == "127.0.0.1":
            route.continue_()
        else:
            elsewhere.append(route.request.url)
            route.abort()

    page.route("**/*", local_only)
    errors: list[str] = []

    def on_console(message) -> None:
        if message.type == "error":
            errors.append(message.text)

    page.on("console", on_console)
    page.goto(f"{made_run_web.url}/api/docs/")
    page.wait_for_selector("[data-item-id*='/operation/']", state="attached")
    screenshot(page, "api-docs-offline")

    listed = page.eval_on_selector_all(
        "li[data-item-id*='/operation/']",
        "items => items.map((li) => li.dataset.itemId.split('/operation/')[1])",
    )
    assert set(listed) == operations
    # Redoc's "API docs by Redocly" image comes from this host (latencyboard/web/api_docs.py):
    # the page asks nothing of any other host, and its policy refuses nothing.
    page.wait_for_load_state("networkidle")
    assert page.eval_on_selector_all("img", "images => images.every((i) => i.complete)")
    assert elsewhere == []
    assert errors == []

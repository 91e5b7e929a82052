"""Headless Chromium against the real web process.

Browser tests need Debian's ``chromium`` (``.ci/run`` installs it); where it is missing they
are skipped with that reason. Playwright drives the system Chromium: it never downloads a
browser of its own.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from latencyboard.local.embedded import free_port
from tests.support import PYTHON, ROOT, start_process, stop_process

ARTIFACTS = ROOT / "test-artifacts" / "screenshots"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
PASSWORD = "a-browser-test-password-9"

# Playwright's sync API keeps an event loop running in this thread, and Django refuses ORM
# calls from a thread with a running loop; the tests' own ORM calls are plain sync code.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark browser tests, skip them without Chromium, and run them after all the others.

    Playwright keeps an event loop running in the main thread from the first browser test to
    the end of the session; code under test that calls ``async_to_sync`` (channel layer
    publishing) must not run after that. ``make test`` hands out tests in this order
    (``--no-loadscope-reorder``), so the groups of tests that share a module fixture, the
    longest units, come first on either side of that line: a long one handed out last would
    keep one test process busy while the other has finished.
    """
    browser_items = [item for item in items if "tests/browser/" in str(item.path)]
    for item in browser_items:
        item.add_marker(pytest.mark.browser)
        if CHROMIUM is None:
            item.add_marker(
                pytest.mark.skip(reason="chromium is not installed (apt-get install chromium)")
            )
    items.sort(
        key=lambda item: (
            "tests/browser/" in str(item.path),
            item.get_closest_marker("xdist_group") is None,
        )
    )


@dataclass(frozen=True)
class LiveWeb:
    url: str


def serve_web(env: dict[str, str], log_path: Path) -> Iterator[LiveWeb]:
    """The ASGI web app under uvicorn, as `make run` starts it, until the generator closes."""
    port = free_port()
    running = start_process(
        [
            PYTHON,
            "-m",
            "uvicorn",
            "latencyboard.asgi:application",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--lifespan",
            "off",
            "--no-access-log",
        ],
        env,
        log_path,
        ready_port=port,
    )
    yield LiveWeb(f"http://127.0.0.1:{port}")
    stop_process(running)


@pytest.fixture(autouse=True)
def no_live_publishing_here(settings: Any) -> None:
    """Folds that test fixtures run in this process publish nothing: publishing calls
    ``async_to_sync``, which refuses to run in the thread where Playwright keeps its loop.
    The web and worker processes the tests start publish as configured."""
    settings.LIVE_UPDATES = False


@pytest.fixture(scope="session")
def live_web(
    child_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LiveWeb]:
    """The web app on the test database, serving the static sources as they are."""
    yield from serve_web(child_env, tmp_path_factory.mktemp("web") / "web.log")


@pytest.fixture(scope="session")
def browser() -> Iterator[object]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS)
        yield chromium
        chromium.close()


@pytest.fixture
def page(browser: object, request: pytest.FixtureRequest) -> Iterator[object]:
    """A fresh browser context per test, 1400x900, so sessions never leak between tests."""
    context = browser.new_context(viewport={"width": 1400, "height": 900})  # type: ignore[attr-defined]
    tab = context.new_page()
    tab.set_default_timeout(15_000)
    yield tab
    context.close()


def screenshot(page: object, name: str) -> Path:
    """Write a full-page screenshot to test-artifacts/screenshots/ for people to look at."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)  # type: ignore[attr-defined]
    return path


def answered(page: object, url_pattern: str) -> Any:
    """Expect the first successful answer to a request whose URL matches ``url_pattern``: a
    chart told to come back (429 while its team's reads are busy) asks again, so its first
    answer may not be the one it draws."""
    pattern = re.compile(url_pattern)
    return page.expect_response(  # type: ignore[attr-defined]
        lambda r: r.ok and pattern.search(r.url) is not None, timeout=60_000
    )


def log_in(page: object, live_web: LiveWeb, username: str, password: str = PASSWORD) -> None:
    page.goto(f"{live_web.url}/login/")  # type: ignore[attr-defined]
    page.fill("#id_username", username)  # type: ignore[attr-defined]
    page.fill("#id_password", password)  # type: ignore[attr-defined]
    page.click("button[type=submit]")  # type: ignore[attr-defined]
    page.wait_for_url(f"{live_web.url}/")  # type: ignore[attr-defined]

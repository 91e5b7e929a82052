"""Live updates end to end: time from an OTLP request's 200 to its point drawn in a real
headless Chromium, and the web + worker CPU that live updates cost, at about 1,000 spans/s.

Run: ``python benchmarks/bench_live_browser.py [--batches 100] [--spans-per-batch 200]``.

Self-contained, as ``bench_live.py`` (whose traffic and processes it reuses): a throwaway
PostgreSQL and Redis, a real ingest process, a Celery worker (concurrency 2) and beat, and the
web app under uvicorn, with deployed settings (DEBUG off). Chromium has the pipeline page open
on its 1 h window; the page marks each live draw (``performance.mark("latencyboard.live-draw")``
with the end-to-end count of each minute drawn). Every request's spans start in one fixed
minute, so the count drawn for that minute says which requests a draw includes: a request's
latency is from its 200 to the first draw counting it. The same traffic is sent twice, with
``LIVE_UPDATES`` on and off (worker restarted, page left open); the difference in web + worker +
Redis + PostgreSQL CPU is what live updates cost. Writes ``var/bench/live_browser.json``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import http.client
import os
import shutil
import subprocess
import sys
import time
from typing import Any

from _meters import CpuMeter, percentile, postmaster_pid, process_tree
from _stack import (  # puts the repo on sys.path
    PRODUCTION_SETTINGS,
    ROOT,
    BenchStack,
    bench_config,
    free_port,
    interrupt_on_sigterm,
    running_redis,
    write_json,
)
from bench_live import STAGES, export_body, post, redis_processes, start_worker, stop

JSON_PATH = ROOT / "var" / "bench" / "live_browser.json"
PASSWORD = "a-bench-password-for-live-9"  # noqa: S105 (a throwaway database's viewer)
# The web app over plain HTTP on localhost, with its static sources served as they are.
WEB_SETTINGS = {
    "ALLOWED_HOSTS": "localhost,127.0.0.1",
    "SESSION_COOKIE_SECURE": "false",
    "CSRF_COOKIE_SECURE": "false",
    "SECURE_HSTS_SECONDS": "0",
    "STATIC_COLLECTED": "false",
}
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]
COMPONENTS = ("web", "worker", "redis", "postgres")
DRAWS = """() => performance.getEntriesByName("latencyboard.live-draw")
    .map((mark) => [(performance.timeOrigin + mark.startTime) / 1000, mark.detail])"""


def start_web(env: dict[str, str], log: Any) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    argv = [sys.executable, "-m", "uvicorn", "latencyboard.asgi:application"]
    argv += ["--host", "127.0.0.1", "--port", str(port), "--lifespan", "off", "--no-access-log"]
    with open(log, "ab") as out:
        process = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
    url = f"http://localhost:{port}"
    deadline = time.monotonic() + 60
    while True:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
        try:
            conn.request("GET", "/healthz", headers={"host": "localhost"})
            if conn.getresponse().status == 200:
                return process, url
        except OSError:
            pass
        finally:
            conn.close()
        if time.monotonic() > deadline or process.poll() is not None:
            raise RuntimeError(f"web did not start: {log}")
        time.sleep(0.3)


def open_pipeline(page: Any, url: str, username: str, pipeline_id: int) -> None:
    page.goto(f"{url}/login/")
    page.fill("#id_username", username)
    page.fill("#id_password", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url(f"{url}/")
    page.goto(f"{url}/pipelines/{pipeline_id}/?window=1h")
    page.wait_for_selector("body[data-loaded='1h']", timeout=60_000)
    page.wait_for_selector("[data-live-status=live]", timeout=30_000)


def run_phase(
    stack: BenchStack, ports: tuple[int, int], page: Any, live: bool, args: argparse.Namespace
) -> dict[str, Any]:
    from latencyboard.pipelines.models import Pipeline
    from latencyboard.rollups.models import Rollup

    number = 0 if live else 1
    env = {**stack.env, "LIVE_UPDATES": "true" if live else "false"}
    worker = start_worker(env, stack.root / f"worker-{number}.log")
    beat = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "latencyboard", "beat", "--loglevel", "WARNING"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    ingest_port, web_pid = ports
    try:
        minute = (time.time_ns() // 60_000_000_000 - 1) * 60_000_000_000
        minute_iso = time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime(minute // 10**9))
        requests = args.spans_per_batch // (1 + len(STAGES))
        bodies = [export_body(requests, minute, number * 10_000 + i) for i in range(args.batches)]
        post(ingest_port, stack.token, export_body(1, minute, number * 10_000 + 9_999))
        time.sleep(6)  # the warm-up request folded (and drawn, live)
        pipeline = Pipeline.objects.get(team_id=stack.team_id, service_name="live-bench")
        base = sum(
            Rollup.objects.filter(
                pipeline=pipeline,
                stage=None,
                resolution="minute",
                bucket_start=dt.datetime.fromtimestamp(minute // 10**9, dt.UTC),
            ).values_list("count", flat=True)
        )
        page.evaluate("() => performance.clearMarks('latencyboard.live-draw')")
        meter = CpuMeter(
            {
                "web": process_tree(web_pid),
                "worker": process_tree(worker.pid),
                "redis": lambda: redis_processes(stack.env["REDIS_URL"]),
                # the live events' reads of the touched minutes
                "postgres": process_tree(postmaster_pid(stack)),
            }
        )
        meter.start()
        started_wall = time.monotonic()
        interval = args.spans_per_batch / args.spans_per_second
        answered: list[tuple[float, int]] = []
        started = time.monotonic()
        for i, body in enumerate(bodies):
            time.sleep(max(0.0, started + i * interval - time.monotonic()))
            assert post(ingest_port, stack.token, body) == 200
            answered.append((time.time(), base + (i + 1) * requests))
        time.sleep(6)
        wall = time.monotonic() - started_wall
        cores = meter.stop()
        draws = [(at, counts.get(minute_iso, 0)) for at, counts in page.evaluate(DRAWS)]
        latencies, undrawn = [], 0
        for at, expected in answered:
            seen = next((t for t, count in draws if t >= at and count >= expected), None)
            if seen is None:
                undrawn += 1
            else:
                latencies.append(seen - at)
        return {
            "live": live,
            "requests": len(answered),
            "draws": len(draws),
            "drawn": len(latencies),
            "undrawn": undrawn,
            "p50_s": round(percentile(latencies, 50), 3) if latencies else None,
            "p95_s": round(percentile(latencies, 95), 3) if latencies else None,
            "max_s": round(max(latencies), 3) if latencies else None,
            "seconds": round(wall, 1),
            **{f"{name}_cpu_s": round(cores[name] * wall, 2) for name in COMPONENTS},
        }
    finally:
        stop(beat)
        stop(worker)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--batches", type=int, default=100)
    parser.add_argument("--spans-per-batch", type=int, default=200)
    parser.add_argument("--spans-per-second", type=int, default=1000)
    args = parser.parse_args()
    interrupt_on_sigterm()
    chromium = shutil.which("chromium")
    if chromium is None:
        sys.exit("bench_live_browser needs Debian's chromium")
    # Playwright keeps an event loop in this thread; this script's ORM reads are plain sync.
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    with BenchStack(team_name="live-bench") as stack, running_redis(stack) as redis_url:
        stack.env.update({**PRODUCTION_SETTINGS, **WEB_SETTINGS, "REDIS_URL": redis_url})
        os.environ.update(stack.env)
        import django

        django.setup()
        from django.contrib.auth import get_user_model
        from playwright.sync_api import sync_playwright

        from latencyboard.pipelines.models import Pipeline
        from latencyboard.teams.models import Role, Team
        from latencyboard.teams.services import add_member

        user = get_user_model().objects.create_user("live-bench-viewer", password=PASSWORD)
        add_member(Team.objects.get(pk=stack.team_id), user, Role.VIEWER)
        ingest = stack.start_ingest()
        # The pipeline exists before the page opens.
        post(ingest.http_port, stack.token, export_body(1, time.time_ns() - 10**9, 99_999))
        pipeline = Pipeline.objects.get(team_id=stack.team_id, service_name="live-bench")
        web, url = start_web(stack.env, stack.root / "web.log")
        try:
            with sync_playwright() as playwright:
                browser = playwright.chromium.launch(executable_path=chromium, args=CHROMIUM_FLAGS)
                page = browser.new_page(viewport={"width": 1440, "height": 900})
                open_pipeline(page, url, user.get_username(), pipeline.pk)
                phases = [
                    run_phase(stack, (ingest.http_port, web.pid), page, live, args)
                    for live in (True, False)
                ]
                browser.close()
        finally:
            stop(web)
    for phase in phases:
        print(phase)
    on, off = phases
    extra = {name: round(on[f"{name}_cpu_s"] - off[f"{name}_cpu_s"], 2) for name in COMPONENTS}
    figures = {"config": bench_config(**vars(args)), "phases": phases, "live_extra_cpu_s": extra}
    print(
        f"  OTLP 200 → point drawn in Chromium: p50 {on['p50_s']} s, p95 {on['p95_s']} s "
        f"({on['drawn']}/{on['requests']} drawn); live updates cost {extra} CPU s "
        f"over {on['seconds']} s"
    )
    write_json(JSON_PATH, figures)


if __name__ == "__main__":
    main()

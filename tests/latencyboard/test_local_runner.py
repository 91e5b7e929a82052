"""The README's run command, end to end: up, traffic flowing, Ctrl-C, nothing left running."""

from __future__ import annotations

import os
import signal
import subprocess
import time
import urllib.request

import psutil
import psycopg

from latencyboard.local.embedded import free_port
from tests.support import PYTHON, ROOT


def _span_count(port: int) -> int:
    with psycopg.connect(f"postgresql://postgres@127.0.0.1:{port}/latencyboard") as conn:
        row = conn.execute("SELECT count(*) FROM spans_span").fetchone()
        assert row is not None
        return int(row[0])


def _wait_for_line(process: subprocess.Popen[str], marker: str, timeout: float) -> list[str]:
    lines: list[str] = []
    deadline = time.monotonic() + timeout
    assert process.stdout is not None
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if not line and process.poll() is not None:
            break
        lines.append(line)
        if marker in line:
            return lines
    raise AssertionError(f"no {marker!r} within {timeout}s:\n{''.join(lines)}")


def test_run_command_serves_login_stores_demo_spans_and_stops_cleanly(scratch_dir):
    # given a fresh var folder and free ports, with no external servers configured
    ports = {
        name: free_port()
        for name in [
            "WEB_PORT",
            "INGEST_HTTP_PORT",
            "INGEST_GRPC_PORT",
            "EMBEDDED_PG_PORT",
            "EMBEDDED_REDIS_PORT",
        ]
    }
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in {"DATABASE_URL", "REDIS_URL"} and not k.startswith("OTEL_")
    }
    env.update({k: str(v) for k, v in ports.items()}, LATENCYBOARD_VAR_DIR=str(scratch_dir))
    runner = subprocess.Popen(
        [PYTHON, "-m", "latencyboard.local"],
        cwd=ROOT,
        env=env,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    tree: list[psutil.Process] = []
    try:
        # when it has started
        banner = "".join(_wait_for_line(runner, "Press Ctrl-C to stop.", timeout=90))
        tree = psutil.Process(runner.pid).children(recursive=True)

        # then it printed the login and serves the login page at the printed URL
        assert f"http://127.0.0.1:{ports['WEB_PORT']}/" in banner
        assert "Login       admin / " in banner
        with urllib.request.urlopen(f"http://127.0.0.1:{ports['WEB_PORT']}/login/") as page:
            assert page.status == 200
        # and the demo's spans reach PostgreSQL, more and more of them
        deadline = time.monotonic() + 60
        counts = [_span_count(ports["EMBEDDED_PG_PORT"])]
        while time.monotonic() < deadline and not (len(counts) > 2 and counts[-1] > counts[-2] > 0):
            time.sleep(3)
            counts.append(_span_count(ports["EMBEDDED_PG_PORT"]))
        assert counts[-1] > counts[-2] > 0, counts
    finally:
        # when Ctrl-C reaches it
        runner.send_signal(signal.SIGINT)
        runner.wait(60)

    # then it exits cleanly and no process it started is left
    assert runner.returncode == 0
    assert len(tree) >= 7  # postgres, redis, web, ingest, worker, beat, demo (and their children)
    survivors = [p for p in tree if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
    assert survivors == []
    # and the generated admin password is kept readable by its owner only
    password_file = scratch_dir / "admin-password"
    assert password_file.stat().st_mode & 0o777 == 0o600

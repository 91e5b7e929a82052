"""The README's run command, end to end: up, traffic flowing, children restarted when they
die, Ctrl-C, nothing left running."""

from __future__ import annotations

import contextlib
import http.cookiejar
import os
import re
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import psutil
import psycopg
import pytest
import redis

from latencyboard.local.embedded import free_port, port_is_open
from tests.ingest.otlp import SpanSpec, export_request, post
from tests.support import PYTHON, ROOT, wait_until

BANNER_END = "Press Ctrl-C to stop."
PORT_NAMES = (
    "WEB_PORT",
    "INGEST_HTTP_PORT",
    "INGEST_GRPC_PORT",
    "EMBEDDED_PG_PORT",
    "EMBEDDED_REDIS_PORT",
)


@dataclass
class Runner:
    process: subprocess.Popen[str]
    ports: dict[str, int]
    var_dir: Path
    lines: list[str]

    def read_until(self, marker: str, timeout: float) -> str:
        """Output up to the first line (from here on) that contains ``marker``."""
        deadline = time.monotonic() + timeout
        assert self.process.stdout is not None
        start = len(self.lines)
        while time.monotonic() < deadline:
            line = self.process.stdout.readline()
            if not line and self.process.poll() is not None:
                break
            self.lines.append(line)
            if marker in line:
                return "".join(self.lines[start:])
        raise AssertionError(f"no {marker!r} within {timeout}s:\n{''.join(self.lines)}")

    def rest(self) -> str:
        assert self.process.stdout is not None
        return "".join(self.lines) + self.process.stdout.read()

    def tree(self) -> list[psutil.Process]:
        return psutil.Process(self.process.pid).children(recursive=True)

    def child(self, *argv_part: str) -> psutil.Process:
        """The runner's direct child whose command line holds ``argv_part`` in a row."""
        for child in psutil.Process(self.process.pid).children():
            cmdline = child.cmdline()
            for i in range(len(cmdline) - len(argv_part) + 1):
                if tuple(cmdline[i : i + len(argv_part)]) == argv_part:
                    return child
        raise AssertionError(f"no child running {argv_part}")

    def child_called(self, name: str) -> psutil.Process:
        """The runner's direct child whose executable is ``name``."""
        (child,) = [c for c in psutil.Process(self.process.pid).children() if c.name() == name]
        return child

    def span_count(self) -> int:
        return self.count("SELECT count(*) FROM spans_span")

    def secret(self, name: str) -> str:
        return (self.var_dir / "secrets" / name).read_text().strip()

    def count(self, sql: str) -> int:
        port = self.ports["EMBEDDED_PG_PORT"]
        password = self.secret("postgres-password")
        url = f"postgresql://postgres:{password}@127.0.0.1:{port}/latencyboard"
        with psycopg.connect(url) as conn:
            row = conn.execute(sql).fetchone()
            assert row is not None
            return int(row[0])


@pytest.fixture
def start_runner(scratch_dir: Path) -> Iterator[Callable[..., Runner]]:
    """Start ``python -m latencyboard.local`` on free ports with a fresh var folder; the
    runner is stopped with SIGINT at the end if a test left it running."""
    started: list[Runner] = []

    def start(*args: str, ports: dict[str, int] | None = None) -> Runner:
        ports = ports or {name: free_port() for name in PORT_NAMES}
        env = {
            k: v
            for k, v in os.environ.items()
            if k not in {"DATABASE_URL", "REDIS_URL"} and not k.startswith("OTEL_")
        }
        env.update({k: str(v) for k, v in ports.items()}, LATENCYBOARD_VAR_DIR=str(scratch_dir))
        process = subprocess.Popen(
            [PYTHON, "-m", "latencyboard.local", *args],
            cwd=ROOT,
            env=env,
            text=True,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        runner = Runner(process, ports, scratch_dir, [])
        started.append(runner)
        return runner

    yield start
    for runner in started:
        if runner.process.poll() is None:
            runner.process.send_signal(signal.SIGINT)
            runner.process.wait(60)


def _stop(runner: Runner) -> list[psutil.Process]:
    """Ctrl-C the runner; the processes it had running just before."""
    tree = runner.tree()
    runner.process.send_signal(signal.SIGINT)
    runner.process.wait(60)
    return tree


def _alive(processes: list[psutil.Process]) -> list[psutil.Process]:
    return [p for p in processes if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]


def _export(runner: Runner, timeout: float) -> int:
    """POST one span to the ingest port with the demo token, once it listens; the HTTP
    status."""
    token = (runner.var_dir / "demo-token").read_text().strip()
    body = export_request(SpanSpec(name="after-restart"), service="restart-check")
    port = runner.ports["INGEST_HTTP_PORT"]
    headers = {"content-type": "application/x-protobuf", "authorization": f"Bearer {token}"}
    wait_until(lambda: port_is_open(port), timeout=timeout, message=f"no ingest on port {port}")
    return post(f"http://127.0.0.1:{port}/v1/traces", body.SerializeToString(), headers).status


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url) as answer:  # noqa: S310 (http://127.0.0.1 only)
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def _failed_logins_from_forged_addresses(base: str, attempts: int) -> list[int]:
    """Wrong passwords for the admin, each claiming another client in X-Forwarded-For."""
    jar = http.cookiejar.CookieJar()
    browser = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
    with browser.open(f"{base}/login/") as page:
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.read().decode())
    assert token is not None
    statuses = []
    for attempt in range(attempts):
        form = {"csrfmiddlewaretoken": token[1], "username": "admin", "password": "wrong"}
        request = urllib.request.Request(  # noqa: S310 (http://127.0.0.1 only)
            f"{base}/login/",
            data=urllib.parse.urlencode(form).encode(),
            headers={"X-Forwarded-For": f"203.0.113.{attempt + 1}"},
        )
        try:
            with browser.open(request) as answer:
                statuses.append(answer.status)
        except urllib.error.HTTPError as error:
            statuses.append(error.code)
    return statuses


def _assert_served_without_debug(base: str, var_dir: Path) -> None:
    # a thousand and more query parameters: a plain 400 page, no debug page
    many = "&".join(f"p{index}=1" for index in range(1500))
    status, body = _get(f"{base}/login/?{many}")
    assert status == 400
    assert "Bad request" in body
    assert "Traceback" not in body
    # an unknown page: the product's 404, not Django's list of URL patterns
    status, body = _get(f"{base}/no-such-page/")
    assert (status, "URLconf" in body) == (404, False)
    # the collected static files, under their hashed names
    _, login_page = _get(f"{base}/login/")
    stylesheet = re.search(r'href="(/static/[^"]+\.css)"', login_page)
    assert stylesheet is not None
    assert _get(f"{base}{stylesheet[1]}")[0] == 200
    # its own secret key, readable by its owner only
    assert (var_dir / "secret-key").stat().st_mode & 0o777 == 0o600
    # X-Forwarded-For from a local process is not the client's address: the lockout holds
    assert _failed_logins_from_forged_addresses(base, 6)[-1] == 429


def test_run_command_serves_login_stores_history_and_demo_spans_and_stops_cleanly(start_runner):
    # given a fresh var folder and free ports, with no external servers configured
    # when it has started, with one day of demo history
    runner = start_runner("--history-days", "1")
    output = runner.read_until(BANNER_END, timeout=240)
    tree = runner.tree()

    # then it showed the history's progress before the banner
    assert "latencyboard: history: spans 1/1 days, " in output
    assert "latencyboard: history: done: 1 days, " in output
    # and it printed the login and serves the login page at the printed URL
    web_port = runner.ports["WEB_PORT"]
    assert f"http://127.0.0.1:{web_port}/" in output
    assert "Login       admin / " in output
    with urllib.request.urlopen(f"http://127.0.0.1:{web_port}/login/") as page:
        assert page.status == 200
    # and the links its notifications carry lead to that web app
    web = runner.child("latencyboard.asgi:application")
    assert web.environ()["PUBLIC_URL"] == f"http://localhost:{web_port}"
    # and it serves as production does
    _assert_served_without_debug(f"http://127.0.0.1:{web_port}", runner.var_dir)
    # from a web process per core, at least two: one team's long read holds up only its own
    web = runner.child("latencyboard.asgi:application")
    workers = [c for c in web.children() if "spawn_main" in " ".join(c.cmdline())]
    assert len(workers) == max(2, os.cpu_count() or 1)
    # and the application connects as a role of its own, which cannot undo the audit log
    app_url = (
        f"postgresql://latencyboard_app@127.0.0.1:{runner.ports['EMBEDDED_PG_PORT']}/latencyboard"
    )
    assert f"Database    {app_url}" in output
    with psycopg.connect(app_url, password=runner.secret("app-password"), autocommit=True) as conn:
        superuser = conn.execute("SELECT rolsuper FROM pg_roles WHERE rolname = current_user")
        assert superuser.fetchone() == (False,)
        for statement in (
            "DROP TRIGGER audit_log_no_update_delete ON audits_auditevent",
            "TRUNCATE audits_auditevent",
            "DELETE FROM audits_auditevent",
        ):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute(statement)
    # and the demo's live spans reach PostgreSQL, more and more of them
    counts = [runner.span_count()]

    def grown() -> bool:
        counts.append(runner.span_count())
        return len(counts) > 2 and counts[-1] > counts[-2]

    wait_until(grown, timeout=60, interval=0.5, message=lambda: f"span counts {counts}")
    assert counts[-1] > counts[-2] > 0, counts

    # when Ctrl-C reaches it
    _stop(runner)

    # then it exits cleanly and no process it started is left
    assert runner.process.returncode == 0
    assert len(tree) >= 7  # postgres, redis, web, ingest, worker, beat, demo (and their children)
    assert _alive(tree) == []
    # and the generated admin password is kept readable by its owner only
    assert (runner.var_dir / "admin-password").stat().st_mode & 0o777 == 0o600


def test_a_killed_ingest_process_is_restarted_and_accepts_spans_again(start_runner):
    # given a running stack
    runner = start_runner("--no-demo")
    runner.read_until(BANNER_END, timeout=120)
    ingest = runner.child("-m", "ingest")

    # when its ingest process is killed
    ingest.kill()

    # then the runner says so and restarts it after a second
    assert "latencyboard: ingest was killed by SIGKILL; restarting in 1 s" in runner.read_until(
        "restarting", timeout=30
    )
    runner.read_until("latencyboard: ingest restarted", timeout=30)
    restarted = runner.child("-m", "ingest")
    assert restarted.pid != ingest.pid
    # and the ingest port accepts and stores spans again
    stored = runner.span_count()
    assert _export(runner, timeout=60) == 200
    assert runner.span_count() == stored + 1

    # when Ctrl-C reaches it
    tree = _stop(runner)

    # then nothing it started, the new ingest process included, is left
    assert runner.process.returncode == 0
    assert restarted in tree
    assert _alive(tree) == []


def test_a_killed_redis_is_restarted_and_new_spans_are_rolled_up_again(start_runner):
    # given a running stack
    runner = start_runner("--no-demo")
    runner.read_until(BANNER_END, timeout=120)

    # when its embedded Redis, the Celery broker, is killed
    runner.child_called("redis-server").kill()

    # then the runner restarts it
    assert "latencyboard: redis was killed by SIGKILL; restarting in 1 s" in runner.read_until(
        "restarting", timeout=30
    )
    runner.read_until("latencyboard: redis restarted", timeout=30)
    # and a span stored afterwards is rolled up: beat and worker are back on the broker
    assert _export(runner, timeout=60) == 200
    _assert_rolled_up(runner)


def _assert_rolled_up(runner: Runner) -> None:
    """Every stored batch is rolled up within 90 s, into rollup rows."""
    pending = "SELECT count(*) FROM spans_ingestbatch WHERE rolled_up_at IS NULL"
    wait_until(lambda: runner.count(pending) == 0, timeout=90, interval=0.2)
    assert runner.count("SELECT count(*) FROM rollups_rollup") > 0


SERVER_SECRETS = ("postgres-password", "app-password", "redis-password")
REACH_BOTH_SERVERS = """
import redis
from django.conf import settings
from django.db import connection
with connection.cursor() as cursor:
    cursor.execute("SELECT 1")
    ping = redis.Redis.from_url(settings.REDIS_URL, socket_timeout=5).ping()
    print(cursor.fetchone()[0], "PONG" if ping else "")
"""


def test_run_command_servers_refuse_anyone_without_the_generated_passwords(start_runner):
    # given a running stack on its embedded servers
    runner = start_runner("--no-demo")
    output = runner.read_until(BANNER_END, timeout=240)
    pg_port, redis_port = runner.ports["EMBEDDED_PG_PORT"], runner.ports["EMBEDDED_REDIS_PORT"]

    # then another local user's client, without a password, is refused by PostgreSQL over TCP,
    # as its superuser and as the application's role
    for role in ("postgres", "latencyboard_app"):
        url = f"postgresql://{role}@127.0.0.1:{pg_port}/latencyboard"
        with pytest.raises(psycopg.OperationalError, match="no password supplied"):
            psycopg.connect(url, connect_timeout=5)
        with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
            psycopg.connect(url, password="guess", connect_timeout=5)
    # and by Redis
    with pytest.raises(redis.AuthenticationError):
        redis.Redis(port=redis_port, socket_timeout=5).ping()
    # and the passwords are kept in a folder of var/ that only the runner's user may enter
    secrets_dir = runner.var_dir / "secrets"
    assert secrets_dir.stat().st_mode & 0o777 == 0o700
    assert {p.name: p.stat().st_mode & 0o777 for p in secrets_dir.iterdir()} == dict.fromkeys(
        SERVER_SECRETS, 0o600
    )
    # and with them the product works: a span is stored by ingest as the application's role
    # and rolled up by beat and the worker through Redis
    with redis.Redis(port=redis_port, password=runner.secret("redis-password")) as client:
        assert client.ping() is True
    assert _export(runner, timeout=60) == 200
    _assert_rolled_up(runner)
    # and a command run by hand beside it, no URL given, reaches both with the kept passwords
    by_hand = subprocess.run(
        [PYTHON, "manage.py", "shell", "-c", REACH_BOTH_SERVERS],
        cwd=ROOT,
        env={
            "PATH": os.environ["PATH"],
            "LATENCYBOARD_VAR_DIR": str(runner.var_dir),
            "EMBEDDED_PG_PORT": str(pg_port),
            "EMBEDDED_REDIS_PORT": str(redis_port),
        },
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (by_hand.returncode, by_hand.stdout.splitlines()[-1:]) == (0, ["1 PONG"]), by_hand.stderr
    # and no password shows in the terminal, a log or any process's command line
    shown = [output, *(log.read_text() for log in (runner.var_dir / "log").iterdir())]
    for process in runner.tree():
        with contextlib.suppress(psutil.NoSuchProcess):  # a short-lived child may be gone
            shown.append(" ".join(process.cmdline()))
    passwords = [runner.secret(name) for name in SERVER_SECRETS]
    assert [p for p in passwords if any(p in text for text in shown)] == []


def test_a_child_that_keeps_crashing_stops_everything_with_an_error(start_runner):
    # given the ingest port taken by another program, so that ingest exits at every start
    ports = {name: free_port() for name in PORT_NAMES}
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", ports["INGEST_HTTP_PORT"]))
        squatter.listen()

        # when the stack starts
        runner = start_runner("--no-demo", ports=ports)
        runner.read_until("latencyboard: ingest exited with code 1; restarting in 1 s", 120)
        tree = runner.tree()
        runner.process.wait(120)

    # then ingest was restarted after 1, 2, 4 and 8 s, and its fifth crash stopped everything
    output = runner.rest()
    for delay in (2, 4, 8):
        assert f"latencyboard: ingest exited with code 1; restarting in {delay} s" in output
    assert "ingest exited with code 1: 5 crashes, each within 60 s of the one before" in output
    assert "Address already in use" in output  # the tail of its log says why
    assert runner.process.returncode == 1
    assert _alive(tree) == []

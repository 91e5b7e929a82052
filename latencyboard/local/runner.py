"""``python -m latencyboard.local``: the whole product on one machine, stopped by one Ctrl-C.

Starts (unless ``DATABASE_URL``/``REDIS_URL`` point elsewhere) an embedded PostgreSQL and
Redis, migrates, loads a week of demo history on first start (``manage.py demo_history``),
then runs the web app, the OTLP ingest listener, a Celery worker and beat, and a demo inference
service, all as children of this process. A child or server that dies is restarted with
backoff (:mod:`latencyboard.local.supervisor`). Every child runs in its own process group and
dies with this process, so SIGINT/SIGTERM here leaves nothing running.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Mapping
from pathlib import Path
from types import FrameType
from urllib.parse import urlsplit

from latencyboard.local.embedded import (
    EmbeddedPostgres,
    EmbeddedRedis,
    die_with_parent,
    secrets_dir,
)
from latencyboard.local.secret_files import secret
from latencyboard.local.supervisor import BASE_DIR, Child, GaveUp, Supervisor, tail

# uvicorn's protocol with a deadline on request headers (a slow-header client is cut off).
HEADER_TIMEOUT_PROTOCOL = "latencyboard.header_timeout:HeaderTimeoutProtocol"


class Stop(Exception):
    pass


def _on_signal(signum: int, frame: FrameType | None) -> None:
    raise Stop(signal.Signals(signum).name)


def _say(message: str) -> None:
    print(f"latencyboard: {message}", flush=True)


def _wait_http(url: str, timeout: float, supervisor: Supervisor) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        supervisor.check()
        try:
            with urllib.request.urlopen(url, timeout=2) as response:  # noqa: S310
                if response.status == 200:
                    return
        except OSError:
            time.sleep(0.3)
    raise TimeoutError(f"{url} did not answer within {timeout:.0f}s")


def _manage(env: dict[str, str], *args: str) -> str:
    result = subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=BASE_DIR,
        env=env,
        check=True,
        capture_output=True,
        text=True,
    )
    return result.stdout


def _load_history(env: dict[str, str], days: int | None, log_path: Path) -> None:
    """The demo history of a first start (``manage.py demo_history``, ``days`` long or its
    default), its progress relayed line by line; stopped with the runner."""
    argv = [sys.executable, "manage.py", "demo_history", "--team", "demo"]
    if days is not None:
        argv += ["--days", str(days)]
    with open(log_path, "ab") as log:
        history = subprocess.Popen(
            argv,
            cwd=BASE_DIR,
            env=env,
            stdout=subprocess.PIPE,
            stderr=log,
            stdin=subprocess.DEVNULL,
            text=True,
            start_new_session=True,
            preexec_fn=die_with_parent,
        )
    try:
        assert history.stdout is not None
        for line in history.stdout:
            _say(f"history: {line.rstrip()}")
        if history.wait():
            raise RuntimeError(
                f"the demo history failed (code {history.returncode}); last lines of "
                f"{log_path}:\n{tail(log_path)}"
            )
    finally:
        if history.poll() is None:
            history.kill()
            history.wait()


def collect_static(env: dict[str, str], var_dir: Path, log_path: Path) -> subprocess.Popen[bytes]:
    """Start collecting static files into var/, for the web to serve as in production: hashed
    names cached for a year, precompressed gzip and brotli (Plotly alone is 4.9 MB raw). It
    runs while the history loads; the caller waits for it before starting the web."""
    env["STATIC_ROOT"] = str(var_dir / "static")
    env["STATIC_COLLECTED"] = "true"
    with open(log_path, "ab") as log:
        return subprocess.Popen(
            [sys.executable, "manage.py", "collectstatic", "--noinput"],
            cwd=BASE_DIR,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            preexec_fn=die_with_parent,
        )


LOOPBACK_HOSTS = "localhost,127.0.0.1,[::1]"


def _secret_key_file(var_dir: Path) -> Path:
    """The local Django secret key, generated on first start and kept (mode 0600) in var/:
    sessions survive a restart, and no two installations share a key."""
    path = var_dir / "secret-key"
    secret(path, nbytes=50)
    return path


def serve_without_debug(env: dict[str, str], var_dir: Path) -> None:
    """Run as production does (``DEBUG`` off: no debug pages, no settings in error pages,
    Django's checks of hosts), over plain HTTP on this machine; what ``env`` sets wins."""
    env.setdefault("DEBUG", "false")
    if not env.get("SECRET_KEY") and not env.get("SECRET_KEY_FILE"):
        env["SECRET_KEY_FILE"] = str(_secret_key_file(var_dir))
    env.setdefault("ALLOWED_HOSTS", LOOPBACK_HOSTS)
    # No TLS here: cookies over http, no redirect to https, no HSTS for localhost.
    for name in ("SECURE_SSL_REDIRECT", "SESSION_COOKIE_SECURE", "CSRF_COOKIE_SECURE"):
        env.setdefault(name, "false")
    env.setdefault("SECURE_HSTS_SECONDS", "0")
    if not env.get("EMAIL_HOST"):
        env.setdefault("EMAIL_TO_CONSOLE", "true")


def web_command(env: Mapping[str, str], bind: str) -> list[str]:
    """The web server: ``WEB_CONCURRENCY`` uvicorn processes (uvicorn's own variable; here
    by default one per core, at least two) sharing ``WEB_PORT``. A process runs Python one
    thread at a time, so one team's long read slows only the requests of its own process
    while the others go on serving."""
    workers = env.get("WEB_CONCURRENCY") or str(max(2, os.cpu_count() or 1))
    if not workers.isdigit() or int(workers) < 1:
        raise ValueError(f"WEB_CONCURRENCY must be a whole number of at least 1, not {workers!r}")
    return [
        *(sys.executable, "-m", "uvicorn", "latencyboard.asgi:application"),
        *("--host", bind, "--port", env.get("WEB_PORT", "8000"), "--workers", workers),
        *("--ws", "auto", "--lifespan", "off"),
        # uvicorn would take X-Forwarded-For from any local process as the client's
        # address; TRUSTED_PROXY_COUNT decides in Django whether to trust it.
        "--no-proxy-headers",
        *("--http", HEADER_TIMEOUT_PROTOCOL),
    ]


def _children(env: dict[str, str], log_dir: Path, bind: str, demo: bool) -> list[Child]:
    python = sys.executable
    http_port, grpc_port = env.get("INGEST_HTTP_PORT", "4318"), env.get("INGEST_GRPC_PORT", "4317")
    commands = {
        "web": web_command(env, bind),
        "ingest": [
            *(python, "-m", "ingest", "--host", bind),
            *("--http-port", http_port, "--grpc-port", grpc_port),
        ],
        "worker": [
            *(python, "-m", "celery", "-A", "latencyboard", "worker", "--loglevel", "INFO"),
            *("--concurrency", "2", "--hostname", "worker@%h", "--queues", "celery,reports"),
        ],
        # Notifications apart: a slow receiver must never hold the fold's worker. Its
        # processes are the delivery slots the outbox hands out (as in docker compose).
        "notifier": [
            *(python, "-m", "celery", "-A", "latencyboard", "worker", "--loglevel", "INFO"),
            *("--concurrency", env.get("NOTIFICATION_SLOTS", "2")),
            *("--hostname", "notifier@%h", "--queues", "notifications"),
        ],
        "beat": [python, "-m", "celery", "-A", "latencyboard", "beat", "--loglevel", "INFO"],
    }
    if demo:
        commands["demo"] = [python, "-m", "latencyboard.demo"]
    return [Child(name, argv, log_dir / f"{name}.log", env) for name, argv in commands.items()]


def run(demo: bool, bind: str, history_days: int | None = None) -> int:
    env = dict(os.environ)
    var_dir = Path(env.get("LATENCYBOARD_VAR_DIR", BASE_DIR / "var")).resolve()
    log_dir = var_dir / "log"
    log_dir.mkdir(parents=True, exist_ok=True)
    env["LATENCYBOARD_VAR_DIR"] = str(var_dir)
    env.setdefault("PYTHONUNBUFFERED", "1")
    serve_without_debug(env, var_dir)

    web_port = int(env.get("WEB_PORT", "8000"))
    # Links in notifications and reports point at the web app where this run serves it.
    env.setdefault("PUBLIC_URL", f"http://localhost:{web_port}")
    http_port = int(env.get("INGEST_HTTP_PORT", "4318"))
    grpc_port = int(env.get("INGEST_GRPC_PORT", "4317"))

    supervisor = Supervisor(say=_say)
    signal.signal(signal.SIGINT, _on_signal)
    signal.signal(signal.SIGTERM, _on_signal)
    started = time.monotonic()
    passwords: Path | None = None  # where the embedded servers' passwords are, if any runs
    try:
        if not env.get("DATABASE_URL"):
            postgres = EmbeddedPostgres(
                var_dir / "pg",
                int(env.get("EMBEDDED_PG_PORT", "54329")),
                log_path=log_dir / "postgres.log",
            )
            supervisor.start(postgres)
            passwords = secrets_dir(postgres.data_dir)
            env["DATABASE_MIGRATION_URL"] = postgres.url
            env["DATABASE_URL"] = postgres.app_url
        if not env.get("REDIS_URL"):
            redis = EmbeddedRedis(
                var_dir / "redis",
                int(env.get("EMBEDDED_REDIS_PORT", "56379")),
                log_path=log_dir / "redis.log",
            )
            supervisor.start(redis)
            passwords = secrets_dir(redis.data_dir)
            env["REDIS_URL"] = redis.url

        _manage(env, "migrate", "--noinput")
        credentials = json.loads(_manage(env, "bootstrap_local", *(["--demo"] if demo else [])))
        collecting = collect_static(env, var_dir, log_dir / "collectstatic.log")
        if demo and history_days != 0:
            _load_history(env, history_days, log_dir / "history.log")
        if collecting.wait():
            raise RuntimeError(
                f"collectstatic failed; last lines of {log_dir / 'collectstatic.log'}:\n"
                f"{tail(log_dir / 'collectstatic.log')}"
            )
        if demo:
            env.update(
                {
                    "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{http_port}",
                    "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
                    "OTEL_EXPORTER_OTLP_HEADERS": (
                        f"authorization=Bearer {credentials['demo_token']}"
                    ),
                }
            )
        for child in _children(env, log_dir, bind, demo):
            supervisor.start(child)

        host = "127.0.0.1" if bind in ("0.0.0.0", "::") else bind  # noqa: S104
        _wait_http(f"http://{host}:{web_port}/login/", 60, supervisor)
        _print_banner(
            host,
            web_port,
            http_port,
            grpc_port,
            credentials,
            env,
            var_dir,
            passwords,
            time.monotonic() - started,
            demo,
        )
        while True:
            supervisor.check()
            time.sleep(0.5)
    except Stop as stop:
        print(f"\nlatencyboard: {stop}, stopping…", flush=True)
        return 0
    except (GaveUp, RuntimeError, TimeoutError, subprocess.CalledProcessError) as exc:
        detail = exc.stderr if isinstance(exc, subprocess.CalledProcessError) else ""
        print(f"latencyboard: {exc}\n{detail}", file=sys.stderr, flush=True)
        return 1
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        supervisor.stop_all()
        print("latencyboard: stopped.", flush=True)


def _print_banner(
    host: str,
    web_port: int,
    http_port: int,
    grpc_port: int,
    credentials: dict[str, str | None],
    env: dict[str, str],
    var_dir: Path,
    passwords: Path | None,
    elapsed: float,
    demo: bool,
) -> None:
    password = (
        credentials["password"]
        or f"(set earlier; reset with: manage.py changepassword {credentials['username']})"
    )
    lines = [
        f"latencyboard is up after {elapsed:.1f}s",
        f"  Dashboard   http://{host}:{web_port}/",
        f"  Login       {credentials['username']} / {password}",
        f"  OTLP/HTTP   http://{host}:{http_port}/v1/traces",
        f"  OTLP/gRPC   {host}:{grpc_port}",
        f"  Demo token  {credentials['demo_token']}" if demo else "  Demo        off (--no-demo)",
        f"  Database    {_without_password(env['DATABASE_URL'])}",
        f"  Redis       {_without_password(env['REDIS_URL'])}",
        *([f"  Passwords   {passwords} (its owner's only)"] if passwords else []),
        f"  Logs        {var_dir / 'log'}",
        "Press Ctrl-C to stop.",
    ]
    print("\n".join(lines), flush=True)


def _without_password(url: str) -> str:
    """``url`` with its password, if it has one, left out (for the terminal)."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.netloc.rpartition("@")[2]
    return parts._replace(netloc=f"{parts.username}@{host}" if parts.username else host).geturl()


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m latencyboard.local", description=__doc__)
    parser.add_argument("--no-demo", action="store_true", help="do not start the demo service")
    parser.add_argument("--bind", default=os.environ.get("BIND_HOST", "127.0.0.1"))
    parser.add_argument(
        "--history-days",
        type=int,
        metavar="N",
        help="days of demo history to backfill on first start (default a week, 0: none)",
    )
    args = parser.parse_args()
    if args.history_days is not None and args.history_days < 0:
        parser.error("--history-days must be 0 or more")
    sys.exit(run(demo=not args.no_demo, bind=args.bind, history_days=args.history_days))

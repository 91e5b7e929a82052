"""``python -m latencyboard.local``: the whole product on one machine, stopped by one Ctrl-C.

Starts (unless ``DATABASE_URL``/``REDIS_URL`` point elsewhere) an embedded PostgreSQL and
Redis, migrates, then runs the web app, the OTLP ingest listener, a Celery worker and beat, and
a demo inference service, all as children of this process. Every child runs in its own process
group and dies with this process, so SIGINT/SIGTERM here leaves nothing running.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType

from latencyboard.local.embedded import EmbeddedPostgres, EmbeddedRedis, die_with_parent

BASE_DIR = Path(__file__).resolve().parents[2]
STOP_TIMEOUT = 15.0


@dataclass
class Child:
    name: str
    argv: list[str]
    log_path: Path
    process: subprocess.Popen[bytes] | None = field(default=None)

    def start(self, env: dict[str, str]) -> None:
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                self.argv,
                cwd=BASE_DIR,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                preexec_fn=die_with_parent,
            )

    def stop(self) -> None:
        """SIGTERM to the leader (a warm shutdown for Celery), then SIGKILL its whole group."""
        if self.process is None:
            return
        if self.process.poll() is None:
            self.process.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(STOP_TIMEOUT)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()


class Stop(Exception):
    pass


def _on_signal(signum: int, frame: FrameType | None) -> None:
    raise Stop(signal.Signals(signum).name)


def _tail(path: Path, lines: int = 20) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except FileNotFoundError:
        return ""


def _wait_http(url: str, timeout: float, children: list[Child]) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        _check_alive(children)
        try:
            with urllib.request.urlopen(url, timeout=2) as response:  # noqa: S310
                if response.status == 200:
                    return
        except OSError:
            time.sleep(0.3)
    raise TimeoutError(f"{url} did not answer within {timeout:.0f}s")


def _check_alive(children: list[Child]) -> None:
    for child in children:
        if child.process is not None and child.process.poll() is not None:
            raise RuntimeError(
                f"{child.name} exited with code {child.process.returncode}; "
                f"last lines of {child.log_path}:\n{_tail(child.log_path)}"
            )


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


def collect_static(env: dict[str, str], var_dir: Path) -> None:
    """Collect static files into var/ and have the web serve them as in production: hashed
    names cached for a year, precompressed gzip and brotli (Plotly alone is 4.9 MB raw)."""
    env["STATIC_ROOT"] = str(var_dir / "static")
    env["STATIC_COLLECTED"] = "true"
    _manage(env, "collectstatic", "--noinput")


def run(demo: bool, bind: str) -> int:
    env = dict(os.environ)
    var_dir = Path(env.get("LATENCYBOARD_VAR_DIR", BASE_DIR / "var")).resolve()
    log_dir = var_dir / "log"
    log_dir.mkdir(parents=True, exist_ok=True)
    env["LATENCYBOARD_VAR_DIR"] = str(var_dir)
    env.setdefault("PYTHONUNBUFFERED", "1")

    web_port = int(env.get("WEB_PORT", "8000"))
    http_port = int(env.get("INGEST_HTTP_PORT", "4318"))
    grpc_port = int(env.get("INGEST_GRPC_PORT", "4317"))

    servers: list[EmbeddedPostgres | EmbeddedRedis] = []
    children: list[Child] = []
    signal.signal(signal.SIGINT, _on_signal)
    signal.signal(signal.SIGTERM, _on_signal)
    started = time.monotonic()
    try:
        if not env.get("DATABASE_URL"):
            postgres = EmbeddedPostgres(
                var_dir / "pg",
                int(env.get("EMBEDDED_PG_PORT", "54329")),
                log_path=log_dir / "postgres.log",
            )
            servers.append(postgres)
            postgres.start()
            env["DATABASE_URL"] = postgres.url
        if not env.get("REDIS_URL"):
            redis = EmbeddedRedis(
                var_dir / "redis",
                int(env.get("EMBEDDED_REDIS_PORT", "56379")),
                log_path=log_dir / "redis.log",
            )
            servers.append(redis)
            redis.start()
            env["REDIS_URL"] = redis.url

        _manage(env, "migrate", "--noinput")
        credentials = json.loads(_manage(env, "bootstrap_local"))
        collect_static(env, var_dir)

        python = sys.executable
        children = [
            Child(
                "web",
                [
                    python,
                    "-m",
                    "uvicorn",
                    "latencyboard.asgi:application",
                    "--host",
                    bind,
                    "--port",
                    str(web_port),
                    "--ws",
                    "auto",
                    "--lifespan",
                    "off",
                ],
                log_dir / "web.log",
            ),
            Child(
                "ingest",
                [
                    python,
                    "-m",
                    "ingest",
                    "--host",
                    bind,
                    "--http-port",
                    str(http_port),
                    "--grpc-port",
                    str(grpc_port),
                ],
                log_dir / "ingest.log",
            ),
            Child(
                "worker",
                [
                    python,
                    "-m",
                    "celery",
                    "-A",
                    "latencyboard",
                    "worker",
                    "--loglevel",
                    "INFO",
                    "--concurrency",
                    "2",
                    "--hostname",
                    "worker@%h",
                ],
                log_dir / "worker.log",
            ),
            Child(
                "beat",
                [python, "-m", "celery", "-A", "latencyboard", "beat", "--loglevel", "INFO"],
                log_dir / "beat.log",
            ),
        ]
        if demo:
            env_demo = {
                "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{http_port}",
                "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
                "OTEL_EXPORTER_OTLP_HEADERS": f"authorization=Bearer {credentials['demo_token']}",
            }
            env.update(env_demo)
            children.append(
                Child("demo", [python, "-m", "latencyboard.demo"], log_dir / "demo.log")
            )
        for child in children:
            child.start(env)

        host = "127.0.0.1" if bind in ("0.0.0.0", "::") else bind  # noqa: S104
        _wait_http(f"http://{host}:{web_port}/login/", 60, children)
        _print_banner(
            host,
            web_port,
            http_port,
            grpc_port,
            credentials,
            env,
            var_dir,
            time.monotonic() - started,
            demo,
        )
        while True:
            _check_alive(children)
            time.sleep(0.5)
    except Stop as stop:
        print(f"\nlatencyboard: {stop}, stopping…", flush=True)
        return 0
    except (RuntimeError, TimeoutError, subprocess.CalledProcessError) as exc:
        detail = exc.stderr if isinstance(exc, subprocess.CalledProcessError) else ""
        print(f"latencyboard: {exc}\n{detail}", file=sys.stderr, flush=True)
        return 1
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        for child in reversed(children):
            child.stop()
        for server in reversed(servers):
            server.stop()
        print("latencyboard: stopped.", flush=True)


def _print_banner(
    host: str,
    web_port: int,
    http_port: int,
    grpc_port: int,
    credentials: dict[str, str | None],
    env: dict[str, str],
    var_dir: Path,
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
        f"  Database    {env['DATABASE_URL']}",
        f"  Redis       {env['REDIS_URL']}",
        f"  Logs        {var_dir / 'log'}",
        "Press Ctrl-C to stop.",
    ]
    print("\n".join(lines), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m latencyboard.local", description=__doc__)
    parser.add_argument("--no-demo", action="store_true", help="do not start the demo service")
    parser.add_argument("--bind", default=os.environ.get("BIND_HOST", "127.0.0.1"))
    args = parser.parse_args()
    sys.exit(run(demo=not args.no_demo, bind=args.bind))

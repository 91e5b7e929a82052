"""A throwaway latencyboard stack for benchmarks: PostgreSQL, schema, token, ingest servers.

Everything lives in a fresh temporary directory and runs as a child of the benchmark: an
embedded PostgreSQL 16 (default settings, so fsync and synchronous_commit stay on: figures
must be those of a durable server), the migrated schema, two teams with an ingest token each
(most benchmarks use the first; the second is for those that measure two teams at once), and
any number of ``python -m ingest`` servers. ``BenchStack`` is a context manager whose exit
stops every child it started and removes the directory, also on error and Ctrl-C; the
children additionally die with us (PR_SET_PDEATHSIG) should we be killed outright.

Shared by the end-to-end benchmarks (ingest, rollup, percentiles, pages, query), with a Redis
for those that fold (``running_redis``) and the ``config`` / JSON figures every one writes.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import http.client
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType, TracebackType
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as ``python benchmarks/x.py`` from anywhere
    sys.path.insert(0, str(ROOT))

from latencyboard.local.embedded import (  # noqa: E402
    EmbeddedPostgres,
    EmbeddedRedis,
    die_with_parent,
    free_port,
)

STOP_TIMEOUT = 15.0
READY_TIMEOUT = 60.0
# Settings as deployed (DEBUG off: no query log) for benchmarks that time Django itself.
PRODUCTION_SETTINGS = {
    "DEBUG": "false",
    "SECRET_KEY": "benchmark-only-key-" + "x" * 40,
    "ALLOWED_HOSTS": "localhost",
    "SECURE_SSL_REDIRECT": "false",
}

_SETUP_SCRIPT = """
from latencyboard.teams.models import Team
from latencyboard.teams.services import issue_ingest_token
teams = [Team.objects.create(name=name, slug=name) for name in {names!r}]
print(*(f"{{t.id}} {{issue_ingest_token(t, 'benchmark').plaintext}}" for t in teams))
"""


def _sigterm_as_interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt(signal.Signals(signum).name)


def interrupt_on_sigterm() -> None:
    """Make SIGTERM unwind like Ctrl-C, so ``finally`` blocks stop the children."""
    signal.signal(signal.SIGTERM, _sigterm_as_interrupt)


def tail(path: Path, lines: int = 30) -> str:
    """The last lines of a log file, for error messages."""
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except FileNotFoundError:
        return f"({path} does not exist)"


@dataclass
class IngestServer:
    """One ``python -m ingest`` (OTLP/HTTP + OTLP/gRPC) of the stack, with its workers."""

    http_port: int
    grpc_port: int
    threads: int | None
    processes: int
    log_path: Path
    process: subprocess.Popen[bytes] | None = field(default=None, init=False)

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def start(self, env: dict[str, str]) -> None:
        argv = [
            sys.executable,
            "-m",
            "ingest",
            "--host",
            "127.0.0.1",
            "--http-port",
            str(self.http_port),
            "--grpc-port",
            str(self.grpc_port),
        ]
        if self.threads is not None:
            argv += ["--threads", str(self.threads)]
        argv += ["--processes", str(self.processes)]
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                argv,
                cwd=ROOT,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                # Own process group: a terminal Ctrl-C reaches only us, and we stop it in order.
                start_new_session=True,
                preexec_fn=die_with_parent,
            )
        self._wait_ready()

    def _healthy(self) -> bool:
        conn = http.client.HTTPConnection("127.0.0.1", self.http_port, timeout=2)
        try:
            conn.request("GET", "/healthz")
            return conn.getresponse().status == 200
        except OSError:
            return False
        finally:
            conn.close()

    def _wait_ready(self) -> None:
        assert self.process is not None
        deadline = time.monotonic() + READY_TIMEOUT
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(
                    f"ingest exited with code {self.process.returncode} while starting; "
                    f"last lines of {self.log_path}:\n{tail(self.log_path)}"
                )
            if self._healthy():
                return
            time.sleep(0.2)
        raise TimeoutError(f"ingest on :{self.http_port} not ready within {READY_TIMEOUT:.0f}s")

    def stop(self) -> None:
        """SIGINT (uvicorn's graceful stop), then SIGKILL to whatever is left of its group."""
        if self.process is None:
            return
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(STOP_TIMEOUT)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()


@dataclass(frozen=True)
class BenchTeam:
    """A team of the stack and the plaintext of its ingest token."""

    name: str
    id: int
    token: str


@dataclass
class BenchStack:
    """PostgreSQL with the migrated schema and two teams' tokens, plus ingest servers on demand.

    ``keep=True`` leaves the temporary directory (data and logs) in place for a post-mortem;
    ``log_dir`` receives a copy of the PostgreSQL and ingest logs when the stack stops.
    """

    keep: bool = False
    log_dir: Path | None = None
    team_name: str = "bench"
    second_team_name: str = "bench-b"
    root: Path = field(init=False)
    postgres: EmbeddedPostgres = field(init=False)
    env: dict[str, str] = field(init=False)
    team: BenchTeam = field(init=False)
    second_team: BenchTeam = field(init=False)
    ingest: list[IngestServer] = field(default_factory=list, init=False)

    def __enter__(self) -> BenchStack:
        self.root = Path(tempfile.mkdtemp(prefix="latencyboard-bench-"))
        try:
            self._start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()

    @property
    def database_url(self) -> str:
        return self.postgres.url

    @property
    def teams(self) -> tuple[BenchTeam, BenchTeam]:
        return self.team, self.second_team

    @property
    def team_id(self) -> int:
        return self.team.id

    @property
    def token(self) -> str:
        return self.team.token

    def _start(self) -> None:
        self.postgres = EmbeddedPostgres(
            self.root / "pg", free_port(), log_path=self.root / "postgres.log"
        )
        self.postgres.start()
        env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
        env.update(
            {
                "DATABASE_URL": self.postgres.url,
                "DJANGO_SETTINGS_MODULE": "latencyboard.settings",
                "LATENCYBOARD_VAR_DIR": str(self.root / "var"),
                "PYTHONUNBUFFERED": "1",
            }
        )
        self.env = env
        self.manage("migrate", "--no-input")
        names = (self.team_name, self.second_team_name)
        words = self.manage("shell", "-c", _SETUP_SCRIPT.format(names=names))
        self.team, self.second_team = (
            BenchTeam(name, int(words[2 * i]), words[2 * i + 1]) for i, name in enumerate(names)
        )

    def manage(self, *args: str) -> list[str]:
        """Run ``manage.py`` against the stack's database; the last stdout line, split."""
        try:
            result = subprocess.run(
                [sys.executable, "manage.py", *args],
                cwd=ROOT,
                env=self.env,
                check=True,
                capture_output=True,
                text=True,
            )
        except subprocess.CalledProcessError as exc:
            raise RuntimeError(f"manage.py {args[0]} failed:\n{exc.stderr}") from exc
        lines = result.stdout.strip().splitlines()
        return lines[-1].split() if lines else []

    def start_ingest(self, threads: int | None = None, processes: int = 1) -> IngestServer:
        """Start an ingest server with ``processes`` workers sharing its ports."""
        number = len(self.ingest)
        server = IngestServer(
            free_port(), free_port(), threads, processes, self.root / f"ingest-{number}.log"
        )
        self.ingest.append(server)
        server.start(self.env)
        return server

    def _save_logs(self) -> None:
        if self.log_dir is None or not hasattr(self, "root"):
            return
        shutil.rmtree(self.log_dir, ignore_errors=True)  # only this run's logs
        self.log_dir.mkdir(parents=True, exist_ok=True)
        for log in self.root.glob("*.log"):
            shutil.copy(log, self.log_dir / log.name)

    def stop(self) -> None:
        """Stop every child (ingest first, then PostgreSQL), then remove the directory."""
        # A second Ctrl-C while stopping must not leave children behind.
        previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
        try:
            for server in reversed(self.ingest):
                server.stop()
            if getattr(self, "postgres", None) is not None:
                self.postgres.stop()
        finally:
            signal.signal(signal.SIGINT, previous)
            self._save_logs()
            if self.keep:
                print(f"bench: kept {self.root}", file=sys.stderr)
            else:
                shutil.rmtree(self.root, ignore_errors=True)


@contextlib.contextmanager
def running_redis(stack: BenchStack) -> Iterator[str]:
    """A throwaway Redis in the stack's directory for the ``with`` block; yields its URL."""
    redis = EmbeddedRedis(stack.root / "redis", free_port())
    try:
        redis.start()
        yield redis.url
    finally:
        redis.stop()


def bench_config(**settings: Any) -> dict[str, Any]:
    """The ``config`` figures of a run: its command line, ``settings``, the machine and time."""
    script = Path(sys.argv[0]).name
    return {
        "command": f"python benchmarks/{script} {' '.join(sys.argv[1:])}".strip(),
        **settings,
        "cpus": os.cpu_count(),
        "at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
    }


def write_json(path: Path, figures: dict[str, Any]) -> None:
    """Write the figures (creating the directory) and say where."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(figures, indent=2) + "\n")
    print(f"  figures written to {path}")

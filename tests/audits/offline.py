"""Running the stand-alone verifier as an auditor would: its own process, no database
settings, and Django made unimportable."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from tests.support import PYTHON, ROOT

# Any import of Django fails in the verifier's process: it must not need it.
_OFFLINE = (
    "import runpy, sys; sys.modules['django'] = None; "
    "runpy.run_module('audits.verify', run_name='__main__', alter_sys=True)"
)


def verify_offline(folder: Path, public_key: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DATABASE", "DJANGO"))}
    return subprocess.run(
        [PYTHON, "-c", _OFFLINE, str(folder), "--public-key", public_key],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )

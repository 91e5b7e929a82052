from __future__ import annotations

import sys
from collections.abc import Iterator

import pytest

from tests.ingest.conftest import IngestServer, running_ingest
from tests.support import ROOT

# Benchmark modules import one another by bare name, as ``python benchmarks/x.py`` runs them.
if str(ROOT / "benchmarks") not in sys.path:
    sys.path.insert(0, str(ROOT / "benchmarks"))


@pytest.fixture(scope="module")
def ingest_server(
    child_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[IngestServer]:
    """The real ingest process on the test database, as the benchmarks run it."""
    with running_ingest(child_env, tmp_path_factory.mktemp("ingest") / "ingest.log") as server:
        yield server

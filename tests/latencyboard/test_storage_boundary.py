"""The storage boundary: table names, the binary timestamp epoch, PostgreSQL binary row
layouts and advisory locks appear in ``latencyboard/storage/`` and nowhere else.

Every Python module of the three packages is checked on its own (migrations aside: they are
Django's record of the schema), found by walking the tree, so a module added later is
checked without anyone listing it.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from latencyboard.storage import tables

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("latencyboard", "ingest", "audits")
STORAGE = ROOT / "latencyboard" / "storage"

TABLE_NAMES = sorted(
    value for name, value in vars(tables).items() if name.isupper() and isinstance(value, str)
)
FORBIDDEN = {
    "table name": re.compile(rf"\b({'|'.join(map(re.escape, TABLE_NAMES))})\b"),
    "binary timestamp epoch": re.compile(r"\b946_?684_?800\b"),
    "advisory lock SQL": re.compile(r"pg_advisory", re.IGNORECASE),
    "binary COPY signature": re.compile(r"PGCOPY"),
    # PostgreSQL's binary formats are big-endian (network order), as struct formats and numpy
    # dtypes: ">" or "!" in struct, ">i8"-like in numpy. Little-endian layouts (shared memory,
    # the sketch format) are not PostgreSQL's.
    "big-endian struct layout": re.compile(r"struct\.\w+\(\s*[\"'][>!]"),
    "big-endian numpy layout": re.compile(r"[\"']>[iuf][1248][\"']"),
}


def _modules() -> list[Path]:
    found = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            if STORAGE in path.parents or "migrations" in path.parts:
                continue
            found.append(path)
    return found


def test_the_walk_finds_the_modules():
    # a walk that found nothing would pass every check below
    names = {path.relative_to(ROOT).as_posix() for path in _modules()}
    assert {"ingest/writer.py", "latencyboard/rollups/services.py"} <= names
    assert not any(name.startswith("latencyboard/storage/") for name in names)


def test_the_table_names_are_the_tables():
    assert "spans_span" in TABLE_NAMES
    assert "rollups_rollup" in TABLE_NAMES


@pytest.mark.parametrize("module", _modules(), ids=lambda path: path.relative_to(ROOT).as_posix())
def test_module_stays_outside_the_storage_layer(module):
    # given a module outside latencyboard/storage/
    text = module.read_text(encoding="utf-8")

    # when it is searched for what only the storage layer may know
    found = {
        what: sorted({match.group(0) for match in pattern.finditer(text)})
        for what, pattern in FORBIDDEN.items()
        if pattern.search(text)
    }

    # then nothing is found
    assert found == {}


def _imports(module: str) -> set[str]:
    """The modules ``module``'s own source imports, and theirs within the repository,
    transitively (package ``__init__`` files aside: ``latencyboard``'s starts Celery)."""
    seen: set[str] = set()
    todo = [module]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        path = ROOT / (name.replace(".", "/") + ".py")
        if not path.is_file():
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                todo.extend(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module:
                todo.append(node.module)
                todo.extend(f"{node.module}.{alias.name}" for alias in node.names)
    return seen


NO_STORAGE = {
    "latencyboard.demo.synthetic",
    "latencyboard.pipelines.derivation",
    "ingest.decoding",
    "ingest.protobuf",
}


@pytest.mark.parametrize(
    "module",
    [
        "latencyboard.storage.spans_copy",
        "latencyboard.storage.spans_copy_columns",
        "latencyboard.storage.fold_spans",
        "latencyboard.storage.stage_share_rows",
        "latencyboard.rollups.folding",
        "latencyboard.rollups.stage_share_minutes",
        "latencyboard.pipelines.derivation",
        "ingest.derived_rows",
        "ingest.decoding",
        "ingest.protobuf",
        "latencyboard.demo.synthetic",
    ],
)
def test_encoders_and_maths_import_no_django(module):
    # given a module that encodes, decodes or computes, when its imports are followed
    imported = _imports(module)

    # then none of them is Django (and the walk did follow them into the storage layer)
    assert "latencyboard.storage.timestamps" in imported or module in NO_STORAGE
    assert sorted(name for name in imported if name.split(".")[0] == "django") == []

"""The Citus plan (latencyboard/storage/citus_plan.py, docs/citus.md) against the schema as it
is: the real catalog after migrations, and the ``ON CONFLICT`` targets of the storage SQL.

Citus enforces a unique key on a distributed table only when the key includes the
distribution column, so a key or a conflict target without it would make the plan fail on a
cluster. The same goes for a foreign key from a distributed table to anything but a reference
table or a colocated table, and for any foreign key into a distributed table from elsewhere.
"""

from __future__ import annotations

import importlib
import pkgutil
import re
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import pytest
from django.db import connection

import latencyboard.storage
from latencyboard.storage import citus_plan, tables
from latencyboard.storage.citus_plan import DISTRIBUTED, REFERENCE

pytestmark = pytest.mark.django_db

STORAGE = Path(latencyboard.storage.__file__).parent

_UNIQUE_KEYS = """
SELECT coalesce(parent.relname, c.relname), i.relname,
       array(SELECT coalesce(a.attname, '<expression>')
             FROM unnest(ix.indkey::int2[]) WITH ORDINALITY AS k(attnum, n)
             LEFT JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum = k.attnum
             ORDER BY k.n)
FROM pg_index ix
JOIN pg_class c ON c.oid = ix.indrelid
JOIN pg_class i ON i.oid = ix.indexrelid
LEFT JOIN pg_inherits inh ON inh.inhrelid = c.oid
LEFT JOIN pg_class parent ON parent.oid = inh.inhparent
WHERE (ix.indisunique OR ix.indisexclusion) AND coalesce(parent.relname, c.relname) = ANY(%s)
ORDER BY 1, 2
"""
_CONSTRAINT_COLUMNS = """
SELECT array(SELECT a.attname FROM unnest(con.conkey) WITH ORDINALITY AS k(attnum, n)
             JOIN pg_attribute a ON a.attrelid = con.conrelid AND a.attnum = k.attnum
             ORDER BY k.n)
FROM pg_constraint con JOIN pg_class c ON c.oid = con.conrelid
WHERE c.relname = %s AND con.conname = %s
"""
_FOREIGN_KEYS = """
SELECT con.conname, src.relname, dst.relname,
       array(SELECT a.attname FROM unnest(con.conkey) WITH ORDINALITY AS k(attnum, n)
             JOIN pg_attribute a ON a.attrelid = con.conrelid AND a.attnum = k.attnum
             ORDER BY k.n),
       array(SELECT a.attname FROM unnest(con.confkey) WITH ORDINALITY AS k(attnum, n)
             JOIN pg_attribute a ON a.attrelid = con.confrelid AND a.attnum = k.attnum
             ORDER BY k.n)
FROM pg_constraint con
JOIN pg_class src ON src.oid = con.conrelid
JOIN pg_class dst ON dst.oid = con.confrelid
WHERE con.contype = 'f' AND NOT src.relispartition AND con.conparentid = 0
ORDER BY 1
"""
_COLUMNS = "SELECT attname FROM pg_attribute WHERE attrelid = %s::regclass AND attnum > 0"

_INSERT = re.compile(r"INSERT\s+INTO\s+(\w+)", re.IGNORECASE)
_CONFLICT = re.compile(
    r"ON\s+CONFLICT\s*(?:\(([^)]*)\)|ON\s+CONSTRAINT\s+(\w+))?\s*DO\b", re.IGNORECASE
)


class ConflictTarget(NamedTuple):
    module: str
    table: str
    columns: tuple[str, ...] | None  # None: any unique key (ON CONFLICT DO NOTHING)


def _fetch(sql: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall()


def unique_keys(table: str) -> list[tuple[str, tuple[str, ...]]]:
    """``(index, columns)`` of each unique index of ``table`` and of its partitions."""
    return [(str(i), tuple(cols)) for _, i, cols in _fetch(_UNIQUE_KEYS, [[table]])]


def constraint_columns(table: str, name: str) -> tuple[str, ...]:
    rows = _fetch(_CONSTRAINT_COLUMNS, [table, name])
    assert len(rows) == 1, f"no constraint {name} on {table}"
    return tuple(rows[0][0])


def storage_sql() -> Iterator[tuple[str, str]]:
    """``(module, statement)`` for every string constant of the storage modules (not their
    docstrings, which may speak of ``ON CONFLICT``)."""
    for info in pkgutil.iter_modules([str(STORAGE)]):
        module = importlib.import_module(f"latencyboard.storage.{info.name}")
        for name, value in vars(module).items():
            if isinstance(value, str) and not name.startswith("__"):
                yield info.name, value


def conflict_targets() -> list[ConflictTarget]:
    """The ``ON CONFLICT`` target of each upsert in the storage SQL, by column names."""
    found = set()
    for module, sql in storage_sql():
        conflict = _CONFLICT.search(sql)
        if conflict is None:
            continue
        table = _INSERT.search(sql)
        assert table is not None, f"{module}: ON CONFLICT without INSERT INTO: {sql}"
        name = table.group(1)
        listed, constraint = conflict.groups()
        columns: tuple[str, ...] | None = None
        if listed is not None:
            columns = tuple(c.strip() for c in listed.split(","))
        elif constraint is not None:
            columns = constraint_columns(name, constraint)
        found.add(ConflictTarget(module, name, columns))
    return sorted(found, key=lambda t: (t.module, t.table, t.columns or ()))


def colocation_group(table: str) -> str:
    while (parent := DISTRIBUTED[table].colocate_with) is not None:
        table = parent
    return table


@pytest.mark.parametrize("table", sorted(DISTRIBUTED))
def test_every_unique_key_of_a_distributed_table_includes_its_column(table: str) -> None:
    # given the unique keys of the table and its partitions, as the plan re-declares them
    keys = unique_keys(table)
    planned = citus_plan.keys_after_rekey(table, [columns for _, columns in keys])

    # then each includes the distribution column
    column = DISTRIBUTED[table].column
    lacking = [name for (name, _), cols in zip(keys, planned, strict=True) if column not in cols]
    assert keys, f"{table} has no unique key: the catalog query found nothing"
    assert lacking == [], f"unique keys of {table} without {column}"


def test_every_conflict_target_of_a_distributed_table_includes_its_column() -> None:
    # given the ON CONFLICT targets of the storage SQL
    targets = conflict_targets()

    # then those on distributed tables name the distribution column (or, with no target,
    # every unique key of the table does: checked above)
    lacking = [
        target
        for target in targets
        if target.table in DISTRIBUTED
        and target.columns is not None
        and DISTRIBUTED[target.table].column not in target.columns
    ]
    assert lacking == []
    # and the scan found the upserts the fold and ingest make (an empty scan proves nothing)
    assert {t.table for t in targets} >= {
        tables.SPAN,
        tables.ROLLUP,
        tables.COHORT_ROLLUP,
        tables.SLA_MINUTE,
        tables.PIPELINE,
        tables.STAGE,
    }


def test_every_storage_module_that_upserts_was_parsed() -> None:
    # given the storage modules whose source has an ON CONFLICT clause
    upserting = {path.stem for path in STORAGE.glob("*.py") if _CONFLICT.search(path.read_text())}

    # then the scan of their SQL constants found a target in each (SQL built inside a
    # function would escape it)
    assert upserting - {target.module for target in conflict_targets()} == set()


def test_foreign_keys_keep_to_reference_or_colocated_tables() -> None:
    # given every foreign key of the schema
    wrong = []
    for name, src, dst, src_cols, dst_cols in _fetch(_FOREIGN_KEYS, []):
        # then one from a distributed table points at a reference table, or at a colocated
        # table through both distribution columns; none points into a distributed table
        # from elsewhere
        if src in DISTRIBUTED:
            column = DISTRIBUTED[str(src)].column
            colocated = (
                dst in DISTRIBUTED
                and colocation_group(str(src)) == colocation_group(str(dst))
                and (column, DISTRIBUTED[str(dst)].column) in zip(src_cols, dst_cols, strict=True)
            )
            if dst not in REFERENCE and not colocated:
                wrong.append(name)
        elif dst in DISTRIBUTED:
            wrong.append(name)
    assert wrong == []


@pytest.mark.parametrize("table", sorted(DISTRIBUTED))
def test_the_plan_names_columns_and_keys_that_exist(table: str) -> None:
    # given the table's columns and unique keys
    columns = {name for (name,) in _fetch(_COLUMNS, [table])}
    keys = {cols for _, cols in unique_keys(table)}

    # then its distribution column exists, and so does every key the plan re-declares
    assert DISTRIBUTED[table].column in columns
    assert set(DISTRIBUTED[table].rekey) <= keys, f"{table}: re-declares keys it does not have"


@pytest.mark.parametrize("table", sorted(REFERENCE))
def test_the_reference_tables_exist(table: str) -> None:
    assert _fetch("SELECT to_regclass(%s) IS NOT NULL", [table]) == [(True,)]


def test_the_ddl_makes_reference_tables_first_then_distributes_every_planned_table() -> None:
    statements = citus_plan.ddl()

    made = [s for s in statements if "create_" in s]
    assert made[: len(REFERENCE)] == [
        f"SELECT create_reference_table('{table}')" for table in sorted(REFERENCE)
    ]
    assert [s.split("'")[1] for s in made[len(REFERENCE) :]] == list(DISTRIBUTED)

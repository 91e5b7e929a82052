"""Seeded rows built once per test process and copied back for each test that asks for them.

A day of demo traffic takes a test process 15 s (50 s on a busy machine) to back-fill and fold;
writing its rows back takes 2 s. :class:`Seeds` builds a seed the first time a test asks for
it, keeps every row the build wrote (binary COPY, in memory) and writes the same rows back
into the emptied database for each later test. Each test still gets its own copy, committed
for the processes it starts: what one test writes is flushed after it, as before, and the
next test gets the seed as built.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from django.db import connection, transaction

from latencyboard.storage import partitions, tables


def _emptied_tables() -> list[str]:
    """The tables the flush between transactional tests empties (every model's), and the span
    tables the suite empties after it (tests/span_storage.py)."""
    names = connection.introspection.django_table_names(only_existing=True, include_views=False)
    return [*sorted(names), tables.SPAN, tables.SPAN_EVENTS]


def _row_counts(cursor: Any, names: list[str]) -> dict[str, int]:
    counts = ", ".join(f"(SELECT count(*) FROM {name})" for name in names)  # noqa: S608
    cursor.execute(f"SELECT {counts}")
    return dict(zip(names, cursor.fetchone(), strict=True))


def _columns(cursor: Any, table: str) -> str:
    """The table's columns that take a value on insert (generated ones are computed)."""
    cursor.execute(
        "SELECT string_agg(quote_ident(attname), ', ' ORDER BY attnum) FROM pg_attribute"
        " WHERE attrelid = %s::regclass AND attnum > 0 AND NOT attisdropped"
        " AND attgenerated = ''",
        [table],
    )
    return str(cursor.fetchone()[0])


@dataclass(frozen=True)
class Snapshot:
    rows: dict[str, tuple[str, bytes]]  # table: (its columns, their rows in binary COPY)
    days: tuple[partitions.DayPartition, ...]  # the span partitions the rows fall in

    @classmethod
    def since(cls, before: dict[str, int]) -> Snapshot:
        """Every row written to the emptied tables since ``before`` (their row counts) was
        taken, when those tables held only rows the flush puts back itself (content types,
        permissions)."""
        rows = {}
        with connection.cursor() as cursor:
            after = _row_counts(cursor, list(before))
            for table, count in after.items():
                if count == before[table]:
                    continue
                if before[table]:
                    raise AssertionError(
                        f"a seed added rows to {table}, which held rows before it was built"
                    )
                columns = _columns(cursor, table)
                with cursor.connection.cursor().copy(
                    f"COPY (SELECT {columns} FROM {table}) TO STDOUT (FORMAT BINARY)"  # noqa: S608
                ) as out:
                    rows[table] = (columns, b"".join(bytes(chunk) for chunk in out))
            cursor.execute(f"SELECT DISTINCT tableoid::regclass::text FROM {tables.SPAN}")  # noqa: S608
            days = [partitions.DayPartition.from_name(name) for (name,) in cursor.fetchall()]
        return cls(rows, tuple(day for day in days if day is not None))

    def restore(self) -> None:
        """Write the rows back, in one transaction. They were consistent when they were copied,
        so a superuser (the suite's own server) skips checking their foreign keys again: that
        was half the time of writing them."""
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute("SELECT current_setting('is_superuser') = 'on'")
            if cursor.fetchone()[0]:
                cursor.execute("SET LOCAL session_replication_role = replica")
            for day in self.days:
                cursor.execute(day.create_sql())
            raw = cursor.connection.cursor()
            for table, (columns, data) in self.rows.items():
                with raw.copy(f"COPY {table} ({columns}) FROM STDIN (FORMAT BINARY)") as into:
                    into.write(data)


@dataclass
class Seeds:
    """The seeds one test process has built, by name: each built once, restored after."""

    built: dict[str, tuple[Any, Snapshot]] = field(default_factory=dict)

    def get(self, name: str, build: Callable[[], Any]) -> Any:
        """The value ``build()`` returned, with the rows it wrote in the database.

        ``build`` must start from the database as a transactional test finds it and write
        only committed rows; each test gets its own copy of the value it returned."""
        if name not in self.built:
            with connection.cursor() as cursor:
                before = _row_counts(cursor, _emptied_tables())
            value = build()
            self.built[name] = (value, Snapshot.since(before))
        else:
            self.built[name][1].restore()
        return copy.deepcopy(self.built[name][0])

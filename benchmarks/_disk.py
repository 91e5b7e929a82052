"""Bytes on disk per stored span: the span partitions' heap, each index and TOAST, per row.

Sizes are what PostgreSQL reports for the leaf partitions of the span table
(``pg_total_relation_size``: every fork, free space included), summed over partitions; each
partition's index is counted under the span table's index it belongs to. Tables that spans
reference but do not repeat (the resource table, say) are reported apart, by name: they grow
with distinct resources, not with spans.
"""

from __future__ import annotations

from typing import Any

import psycopg

from latencyboard.storage import tables

_LEAVES = "SELECT relid FROM pg_partition_tree(%(table)s::regclass) WHERE isleaf"
_TOTALS = f"""
SELECT count(*), coalesce(sum(pg_total_relation_size(c.oid)), 0),
       coalesce(sum(pg_indexes_size(c.oid)), 0),
       coalesce(sum(CASE WHEN c.reltoastrelid <> 0
                    THEN pg_total_relation_size(c.reltoastrelid) ELSE 0 END), 0)
FROM pg_class c WHERE c.oid IN ({_LEAVES})
"""  # noqa: S608 - a constant subquery, the table is a parameter
# A partition's index is attached to (inherits from) the partitioned table's index.
_INDEXES = f"""
SELECT coalesce(parent.relname, i.relname), sum(pg_relation_size(i.oid))
FROM pg_index x
JOIN pg_class i ON i.oid = x.indexrelid
LEFT JOIN pg_inherits h ON h.inhrelid = i.oid
LEFT JOIN pg_class parent ON parent.oid = h.inhparent
WHERE x.indrelid IN ({_LEAVES})
GROUP BY 1 ORDER BY 2 DESC
"""  # noqa: S608 - a constant subquery, the table is a parameter
_ROWS = f"SELECT count(*) FROM {tables.SPAN}"  # noqa: S608 - a constant name
_SIDE_TABLE = "SELECT pg_total_relation_size(to_regclass(%s))"


def span_bytes(conn: psycopg.Connection, side_tables: tuple[str, ...] = ()) -> dict[str, Any]:
    """Bytes of the span partitions, whole and per stored span, split into heap, each index
    and TOAST; ``side_tables`` (those that exist) are measured whole, apart."""
    params = {"table": tables.SPAN}
    partitions, total, indexes, toast = conn.execute(_TOTALS, params).fetchone()  # type: ignore[misc]
    rows = conn.execute(_ROWS).fetchone()[0]  # type: ignore[index]
    per_index = {name: int(size) for name, size in conn.execute(_INDEXES, params)}
    heap = int(total) - int(indexes) - int(toast)
    side = {}
    for name in side_tables:
        size = conn.execute(_SIDE_TABLE, [name]).fetchone()[0]  # type: ignore[index]
        if size is not None:
            side[name] = int(size)

    def per_row(size: int) -> float:
        return size / rows if rows else float("nan")

    return {
        "rows": int(rows),
        "partitions": int(partitions),
        "total_bytes": int(total),
        "bytes_per_span": per_row(int(total)),
        "heap_per_span": per_row(heap),
        "toast_per_span": per_row(int(toast)),
        "index_per_span": {name: per_row(size) for name, size in per_index.items()},
        "side_tables_bytes": side,
    }


def describe(disk: dict[str, Any]) -> list[str]:
    """The report lines of :func:`span_bytes`' figures."""
    indexes = ", ".join(f"{name} {value:.0f}" for name, value in disk["index_per_span"].items())
    lines = [
        f"  bytes on disk per span    {disk['bytes_per_span']:12.0f}"
        f"   ({disk['rows']:,} rows in {disk['partitions']} partitions,"
        f" {disk['total_bytes'] / 2**20:.1f} MiB)",
        f"    heap {disk['heap_per_span']:.0f}, TOAST {disk['toast_per_span']:.0f},"
        f" indexes: {indexes or 'none'}",
    ]
    for name, size in disk["side_tables_bytes"].items():
        lines.append(f"    {name} (not per span) {size / 1024:.0f} KiB")
    return lines

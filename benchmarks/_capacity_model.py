"""The capacity model: hosts and disk for a span rate, from measured per-span costs (pure).

Every figure is a measured cost per stored span times the rate, over a host's usable cores
(``cores_per_host * utilization``: headroom for bursts, dashboards, vacuum and failover) or a
disk's usable bytes. Retention is tiered: ``hot_days`` of every span, then a kept share of the
spans (errors, traces above their minute's p99 and a uniform sample) for the rest of
``retention_days``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

SECONDS_PER_DAY = 86_400


@dataclass(frozen=True)
class SpanCosts:
    """What one stored span costs, measured by ``bench_capacity.py``."""

    ingest_cpu_us: float  # ingest server (decode, validate, COPY), per span
    postgres_ingest_cpu_us: float  # PostgreSQL backends while ingesting
    fold_cpu_us: float  # rollup worker: the fold and the stage shares
    postgres_fold_cpu_us: float  # PostgreSQL backends while folding
    disk_bytes: float  # span table heap + indexes + TOAST
    wal_bytes: float  # ingest and fold together


@dataclass(frozen=True)
class Assumptions:
    cores_per_host: int = 16
    utilization: float = 0.6  # of a host's cores, at the planned peak rate
    disk_fill: float = 0.7  # of a volume, leaving room for vacuum, reindex and growth
    disk_tb_per_host: float = 16.0  # local NVMe of one PostgreSQL host
    retention_days: int = 30
    hot_days: int = 2
    kept_share: float = 0.07  # of spans kept after the hot days


@dataclass(frozen=True)
class Capacity:
    spans_per_s: int
    ingest_cores: float
    ingest_hosts: int
    fold_cores: float
    fold_hosts: int
    postgres_cores: float
    postgres_hosts_for_cpu: int
    postgres_hosts_for_disk: int
    disk_tb_per_day: float
    disk_tb_retained: float
    disk_tb_provisioned: float
    wal_mib_per_s: float
    wal_tb_per_day: float


def _hosts(cores: float, assume: Assumptions) -> int:
    return max(1, math.ceil(cores / (assume.cores_per_host * assume.utilization)))


def capacity(spans_per_s: int, costs: SpanCosts, assume: Assumptions) -> Capacity:
    """Hosts and disk for a steady ``spans_per_s``."""
    ingest = spans_per_s * costs.ingest_cpu_us / 1e6
    fold = spans_per_s * costs.fold_cpu_us / 1e6
    postgres = spans_per_s * (costs.postgres_ingest_cpu_us + costs.postgres_fold_cpu_us) / 1e6
    day = spans_per_s * SECONDS_PER_DAY * costs.disk_bytes / 1e12
    thinned_days = max(0, assume.retention_days - assume.hot_days)
    retained = day * (
        min(assume.hot_days, assume.retention_days) + thinned_days * assume.kept_share
    )
    wal = spans_per_s * costs.wal_bytes
    return Capacity(
        spans_per_s=spans_per_s,
        ingest_cores=ingest,
        ingest_hosts=_hosts(ingest, assume),
        fold_cores=fold,
        fold_hosts=_hosts(fold, assume),
        postgres_cores=postgres,
        postgres_hosts_for_cpu=_hosts(postgres, assume),
        postgres_hosts_for_disk=max(
            1, math.ceil(retained / assume.disk_fill / assume.disk_tb_per_host)
        ),
        disk_tb_per_day=day,
        disk_tb_retained=retained,
        disk_tb_provisioned=retained / assume.disk_fill,
        wal_mib_per_s=wal / 2**20,
        wal_tb_per_day=wal * SECONDS_PER_DAY / 1e12,
    )


def table(rows: list[Capacity]) -> str:
    """The model as a Markdown table, one column per rate."""
    lines = [
        "| | " + " | ".join(f"{row.spans_per_s:,} spans/s" for row in rows) + " |",
        "|---|" + "---:|" * len(rows),
    ]
    cells = [
        ("ingest cores / hosts", lambda r: f"{r.ingest_cores:,.1f} / {r.ingest_hosts}"),
        ("rollup worker cores / hosts", lambda r: f"{r.fold_cores:,.1f} / {r.fold_hosts}"),
        (
            "PostgreSQL cores / hosts for them",
            lambda r: f"{r.postgres_cores:,.1f} / {r.postgres_hosts_for_cpu}",
        ),
        ("PostgreSQL hosts for the disk", lambda r: f"{r.postgres_hosts_for_disk}"),
        ("raw spans TB per day", lambda r: f"{r.disk_tb_per_day:,.2f}"),
        ("span disk TB retained (tiered)", lambda r: f"{r.disk_tb_retained:,.2f}"),
        ("span disk TB to provision", lambda r: f"{r.disk_tb_provisioned:,.2f}"),
        ("WAL MiB/s (per replica stream)", lambda r: f"{r.wal_mib_per_s:,.1f}"),
        ("WAL TB per day (archive)", lambda r: f"{r.wal_tb_per_day:,.2f}"),
    ]
    for label, cell in cells:
        lines.append(f"| {label} | " + " | ".join(cell(row) for row in rows) + " |")
    return "\n".join(lines)

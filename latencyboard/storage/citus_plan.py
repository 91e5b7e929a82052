"""How the tables would be laid out on a Citus cluster (pure: no Django). See docs/citus.md.

Nothing runs this on the single PostgreSQL we use today. It is the plan written as data, so
that ``tests/latencyboard/storage/test_citus_plan.py`` can check it against the real catalog
and the SQL of this package: Citus enforces a unique key (and so an ``ON CONFLICT`` target)
on a distributed table only when the key includes the distribution column, and a foreign key
from a distributed table only to a reference table or a colocated table.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final

from latencyboard.storage.tables import (
    COHORT_ROLLUP,
    MEMBERSHIP,
    OBJECTIVE,
    PIPELINE,
    RESOURCE,
    ROLLUP,
    SLA_MINUTE,
    SPAN,
    SPAN_TEMPLATE,
    STAGE,
    STAGE_SHARE,
    STAGE_SHARE_WATERMARK,
    TEAM,
)


@dataclass(frozen=True)
class Distributed:
    """A hash-distributed table: its distribution column, the table it is colocated with
    (shards of equal hash ranges on the same node; None: a group of its own), and the unique
    keys it is re-declared with first (columns now → columns then), because the key as it is
    lacks the distribution column."""

    column: str
    colocate_with: str | None = None
    rekey: dict[tuple[str, ...], tuple[str, ...]] = field(default_factory=dict)


# Django's surrogate id stays unique through its sequence; the primary key becomes
# (distribution column, id) so that Citus can enforce it shard by shard.
Keys = dict[tuple[str, ...], tuple[str, ...]]
_BY_PIPELINE: Final[Keys] = {("id",): ("pipeline_id", "id")}
_BY_OBJECTIVE: Final[Keys] = {("id",): ("objective_id", "id")}

DISTRIBUTED: Final[dict[str, Distributed]] = {
    # Uniform hash, a trace whole on one shard (waterfall = one shard; stage shares join a
    # root with its children by trace id, shard-local), and already in the primary key.
    SPAN: Distributed("trace_id"),
    # Rollup-side rows by pipeline: a dashboard read is one pipeline (one shard); the fold's
    # upserts and a stage-share minute's rows and watermark land on one node together.
    ROLLUP: Distributed("pipeline_id", rekey=_BY_PIPELINE),
    COHORT_ROLLUP: Distributed("pipeline_id", ROLLUP, rekey=_BY_PIPELINE),
    STAGE_SHARE: Distributed("pipeline_id", ROLLUP, rekey=_BY_PIPELINE),
    STAGE_SHARE_WATERMARK: Distributed("pipeline_id", ROLLUP, rekey=_BY_PIPELINE),
    # No pipeline column: by objective, in a group of its own.
    SLA_MINUTE: Distributed("objective_id", rekey=_BY_OBJECTIVE),
}

REFERENCE: Final = frozenset(
    {TEAM, MEMBERSHIP, PIPELINE, STAGE, OBJECTIVE, RESOURCE, SPAN_TEMPLATE}
)
"""Small tables copied to every node: what distributed tables refer to, and what their
reads join (the access rule's teams and memberships, pipelines and stages; the resources and
span templates every span row points at, so a span read joins them on its own shard). Every other
table stays on the coordinator (a Citus local table)."""


def keys_after_rekey(table: str, keys: list[tuple[str, ...]]) -> list[tuple[str, ...]]:
    """The unique keys ``table`` has once the plan's re-declarations are applied."""
    rekey = DISTRIBUTED[table].rekey
    return [rekey.get(key, key) for key in keys]


def ddl() -> list[str]:
    """The Citus statements that apply the plan, in order (reference tables first: the
    distributed tables' foreign keys point at them)."""
    statements = [f"SELECT create_reference_table('{table}')" for table in sorted(REFERENCE)]
    for table, plan in DISTRIBUTED.items():
        for new in plan.rekey.values():
            statements.append(
                f"ALTER TABLE {table} DROP CONSTRAINT {table}_pkey, "
                f"ADD PRIMARY KEY ({', '.join(new)})"
            )
        colocate = plan.colocate_with or "none"
        statements.append(
            f"SELECT create_distributed_table('{table}', '{plan.column}', "
            f"colocate_with => '{colocate}')"
        )
    return statements

"""Pipeline and stage rows as ingest creates them on first sight, over a psycopg connection.

Live ingest (``ingest.writer``) and the demo back-fill (``latencyboard.demo.backfill``) both resolve
spans to pipeline and stage ids through these functions, in autocommit: a row is committed
before its id is cached and shared.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

import psycopg

from latencyboard.storage.tables import DERIVED_STAGE_RULE, PIPELINE, STAGE, STAGE_RULE

SERVICE_NAME_MAX_LENGTH: Final = 255
ENVIRONMENT_MAX_LENGTH: Final = 100

_ENSURE_PIPELINE: Final = f"""
INSERT INTO {PIPELINE} (team_id, service_name, environment, stage_cap, created_at)
VALUES (%s, %s, %s, %s, now())
ON CONFLICT (team_id, service_name, environment) DO UPDATE SET team_id = EXCLUDED.team_id
RETURNING id
"""  # noqa: S608 - a constant table name, no input
_FIND_PIPELINE: Final = f"""
SELECT id FROM {PIPELINE} WHERE team_id = %s AND service_name = %s AND environment = %s
"""  # noqa: S608 - a constant table name, no input
_PIPELINE_COUNT: Final = f"SELECT count(*) FROM {PIPELINE} WHERE team_id = %s"  # noqa: S608
_RULES: Final = f"""
SELECT stage, name_pattern, attribute, value_pattern FROM {STAGE_RULE}
WHERE pipeline_id = %s ORDER BY position, id
"""  # noqa: S608 - a constant table name, no input
_STAGE_CAP: Final = f"SELECT stage_cap, stage_presets FROM {PIPELINE} WHERE id = %s"  # noqa: S608
_DERIVED_RULES: Final = f"""
SELECT stage, attribute, unit, start_event, end_event FROM {DERIVED_STAGE_RULE}
WHERE pipeline_id = %s ORDER BY position, id
"""  # noqa: S608 - a constant table name, no input
_STAGES: Final = f"SELECT name, id FROM {STAGE} WHERE pipeline_id = %s"  # noqa: S608
_ENSURE_STAGE: Final = f"""
INSERT INTO {STAGE} (pipeline_id, name, definition, created_at) VALUES (%s, %s, %s, now())
ON CONFLICT (pipeline_id, name) DO UPDATE
SET definition = CASE WHEN EXCLUDED.definition = '' THEN {STAGE}.definition
                      ELSE EXCLUDED.definition END
RETURNING id
"""  # noqa: S608 - a constant table name, no input

RuleRow = tuple[str, str, str, str]
"""(stage, name pattern, attribute, value pattern), as ``mapping.Rule`` takes them."""
DerivedRuleRow = tuple[str, str, str, str, str]
"""(stage, attribute, unit, start event, end event), as ``derivation.DerivedRule`` takes them."""


def ensure_pipeline(
    conn: psycopg.Connection[Any], team_id: int, service: str, env: str, *, stage_cap: int
) -> int:
    """The id of the team's pipeline of ``service`` in ``env``, created (with ``stage_cap``)
    when missing. Names longer than their columns are cut, as the decoder keeps them whole."""
    row = conn.execute(
        _ENSURE_PIPELINE,
        [team_id, service[:SERVICE_NAME_MAX_LENGTH], env[:ENVIRONMENT_MAX_LENGTH], stage_cap],
    ).fetchone()
    assert row is not None
    return int(row[0])


def pipeline_within_cap(
    conn: psycopg.Connection[Any],
    team_id: int,
    service: str,
    env: str,
    *,
    stage_cap: int,
    max_pipelines: int,
) -> int | None:
    """Like :func:`ensure_pipeline`, but a pipeline the team does not have yet is created only
    while the team has fewer than ``max_pipelines``; None when it is past its cap. (Two
    processes creating a team's last pipelines at once may pass the cap by a few.)"""
    service, env = service[:SERVICE_NAME_MAX_LENGTH], env[:ENVIRONMENT_MAX_LENGTH]
    row = conn.execute(_FIND_PIPELINE, [team_id, service, env]).fetchone()
    if row is not None:
        return int(row[0])
    count = conn.execute(_PIPELINE_COUNT, [team_id]).fetchone()
    if count is not None and count[0] >= max_pipelines:
        return None
    return ensure_pipeline(conn, team_id, service, env, stage_cap=stage_cap)


@dataclass(frozen=True, slots=True)
class StageRules:
    """What ingest needs to put a pipeline's spans in stages."""

    mapping: list[RuleRow]
    derived: list[DerivedRuleRow]
    cap: int | None  # None: no such pipeline
    presets: bool


def stage_rules(conn: psycopg.Connection[Any], pipeline_id: int) -> StageRules:
    """The pipeline's stage mapping rules and derived stage rules in order, its stage cap and
    whether its presets are on."""
    rules = conn.execute(_RULES, [pipeline_id]).fetchall()
    derived = conn.execute(_DERIVED_RULES, [pipeline_id]).fetchall()
    row = conn.execute(_STAGE_CAP, [pipeline_id]).fetchone()
    if row is None:
        return StageRules(rules, derived, None, True)
    return StageRules(rules, derived, int(row[0]), bool(row[1]))


def stages(conn: psycopg.Connection[Any], pipeline_id: int) -> dict[str, int]:
    """The pipeline's stage ids by name."""
    return {name: int(stage_id) for name, stage_id in conn.execute(_STAGES, [pipeline_id])}


def ensure_stage(
    conn: psycopg.Connection[Any], pipeline_id: int, name: str, definition: str = ""
) -> int:
    """The id of the pipeline's stage ``name``, created when missing; a ``definition`` (of
    a derived stage or measure) replaces the stored one."""
    row = conn.execute(_ENSURE_STAGE, [pipeline_id, name, definition[:300]]).fetchone()
    assert row is not None
    return int(row[0])

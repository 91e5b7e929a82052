"""The span writer's per-process dictionaries: pipeline, stage, resource and template ids by
name or content, rows created on first sight (:mod:`ingest.writer`)."""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping

import orjson
import psycopg

from ingest import derived_rows
from ingest.attribute_split import AttributeSplit
from latencyboard.pipelines import mapping
from latencyboard.storage import pipelines, span_templates
from latencyboard.storage.span_templates import json_bytes

DICTIONARY_TTL = 30.0
MAX_TEMPLATES = 100_000
"""Span templates cached per process; past that, a new combination of shared attribute
values keeps them in its rows (under a template of resource and name only), so that neither
the cache nor the template table grows without bound on unforeseen cardinality."""
MAX_SEEN = 65_536
"""Attribute sets remembered with their stored template (emptied when full): most spans
repeat one exactly, and a hit skips the split and the canonical encoding."""


class PipelineDirectory:
    """Pipeline and stage ids by name, cached per process; rows are created on first sight,
    a pipeline only while its team has fewer than ``max_pipelines``."""

    def __init__(self, max_pipelines: int, stage_cap: int) -> None:
        self.max_pipelines = max_pipelines
        self.stage_cap = stage_cap
        self._lock = threading.Lock()
        self._pipelines: dict[tuple[int, str, str], int] = {}
        self._stages: dict[int, dict[str, int]] = {}
        self._rules: dict[int, tuple[float, derived_rows.PipelineRules]] = {}
        # Pipelines refused at their team's cap, and when: asked again after the TTL.
        self._refused: dict[tuple[int, str, str], float] = {}

    def pipeline(
        self, conn: psycopg.Connection, team_id: int, service: str, env: str
    ) -> int | None:
        """The pipeline's id; None when the team has none such and is at its cap."""
        key = (team_id, service, env)
        found = self._pipelines.get(key)
        if found is not None:
            return found
        now = time.monotonic()
        refused_at = self._refused.get(key)
        if refused_at is not None and now - refused_at < DICTIONARY_TTL:
            return None
        pipeline_id = pipelines.pipeline_within_cap(
            conn,
            team_id,
            service,
            env,
            stage_cap=self.stage_cap,
            max_pipelines=self.max_pipelines,
        )
        with self._lock:
            if pipeline_id is None:
                if len(self._refused) >= MAX_SEEN:  # names are the sender's: no unbounded growth
                    self._refused.clear()
                self._refused[key] = now
                return None
            self._pipelines[key] = pipeline_id
        return pipeline_id

    def rules(self, conn: psycopg.Connection, pipeline_id: int) -> derived_rows.PipelineRules:
        cached = self._rules.get(pipeline_id)
        now = time.monotonic()
        if cached is not None and now - cached[0] < DICTIONARY_TTL:
            return cached[1]
        rules = derived_rows.PipelineRules.of(
            pipelines.stage_rules(conn, pipeline_id), self.stage_cap
        )
        with self._lock:
            self._rules[pipeline_id] = (now, rules)
            self._stages.pop(pipeline_id, None)  # re-read stages too, other processes add some
        return rules

    def stage(
        self, conn: psycopg.Connection, pipeline_id: int, name: str, cap: int, definition: str = ""
    ) -> int:
        stages = self._stages.get(pipeline_id)
        if stages is None:
            stages = pipelines.stages(conn, pipeline_id)
            with self._lock:
                self._stages[pipeline_id] = stages
        found = stages.get(name)
        if found is not None:
            return found
        capped = mapping.apply_cap(name, set(stages) - {mapping.OVERFLOW_STAGE}, cap)
        if capped in stages:
            return stages[capped]
        stage_id = pipelines.ensure_stage(conn, pipeline_id, capped, definition)
        with self._lock:
            stages[capped] = stage_id
        return stage_id


Split = tuple[int, dict[str, object]]
"""A span's template id and the attributes its row keeps (shared: never mutated)."""


class TemplateDirectory:
    """Resource and span template ids, cached per process; rows are stored on first sight.

    Ids are hashes of the content, so a lookup needs the database only for content this
    process has not stored yet, and then once per request (:meth:`store`).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.split = AttributeSplit()
        self._resources: dict[bytes, int] = {}
        self._templates: dict[tuple[int, str, bytes], int] = {}
        self._seen: dict[tuple[int, str, bytes], Split] = {}

    def resource(
        self, attributes: Mapping[str, object], pending: dict[int, span_templates.Resource]
    ) -> int:
        canonical = json_bytes(attributes, sort=True)
        found = self._resources.get(canonical)
        if found is not None:
            return found
        resource = span_templates.Resource.of(attributes)
        pending[resource.id] = resource
        return resource.id

    def template(
        self,
        resource_id: int,
        name: str,
        attributes: Mapping[str, object],
        pending: dict[int, span_templates.Template],
    ) -> Split:
        """The template of a span and the attributes its row keeps."""
        # JSON tells true from 1 and 1.0, which equal each other in a tuple of items.
        seen_key = (resource_id, name, orjson.dumps(attributes))
        found_split = self._seen.get(seen_key)
        if found_split is not None:
            return found_split
        shared, own = self.split.split(attributes)
        key = (resource_id, name, json_bytes(shared, sort=True))
        found = self._templates.get(key)
        if found is not None:
            if len(self._seen) >= MAX_SEEN:
                self._seen.clear()
            self._seen[seen_key] = (found, own)
            return found, own
        if len(self._templates) >= MAX_TEMPLATES and shared:
            return self.template(resource_id, name, {}, pending)[0], dict(attributes)
        template = span_templates.Template.of(resource_id, name, shared)
        pending[template.id] = template
        return template.id, own

    def store(
        self,
        conn: psycopg.Connection,
        resources: dict[int, span_templates.Resource],
        templates: dict[int, span_templates.Template],
    ) -> None:
        """Store what one request saw first (in autocommit: committed before it is cached)."""
        span_templates.ensure_resources(conn, list(resources.values()))
        span_templates.ensure_templates(conn, list(templates.values()))
        with self._lock:
            for resource in resources.values():
                self._resources[resource.attributes] = resource.id
            for template in templates.values():
                self._templates[(template.resource_id, template.name, template.attributes)] = (
                    template.id
                )

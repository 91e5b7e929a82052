"""Resources and span templates: what many spans share, stored once and referenced by id.

A *resource* is the attribute set of an OTLP ``resource`` (``service.version``,
``telemetry.sdk.*``, ``host.*``…, without ``service.name``, which names the pipeline). A
*template* is what the spans of one kind share: their resource, their name and the span
attributes whose values repeat (``model.version``, ``inference.stage``…). A span row keeps
only its template id and the attributes left out of the template (values of attributes that
take too many values to share, see ``ingest.attribute_split``), so a span's attributes read
back as ``resource || template || span``, later ones winning on a key.

Ids are 64-bit hashes of the canonical content, so every ingest process computes the same id
without asking the database; rows are inserted with ``ON CONFLICT DO NOTHING``, cached by the
caller, and never deleted (spans of every retained day point at them; they grow with distinct
templates, not with spans). A hash collision is not assumed away: the stored content is
compared and a mismatch raises :class:`TemplateCollision`.

Pure but for :func:`ensure_resources` and :func:`ensure_templates`, which take a psycopg
connection.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

import orjson
import psycopg

from latencyboard.storage.tables import RESOURCE, SPAN_TEMPLATE

_JSON_NUL: Final = re.compile(rb"(?<!\\)((?:\\\\)*)\\u0000")


class TemplateCollision(RuntimeError):
    """Two different contents hash to one id (about 1 in 2^64 per pair): refuse to mix them."""


def json_bytes(attributes: Mapping[str, object], *, sort: bool = False) -> bytes:
    """``attributes`` as JSON for a ``jsonb`` column (keys sorted with ``sort``).

    PostgreSQL's ``jsonb`` cannot hold ``\\u0000``: an escaped NUL becomes U+FFFD, the
    replacement character, rather than failing the whole request. An escape only counts when
    preceded by an even number of backslashes: ``\\\\u0000`` is a literal backslash and
    ``u0000``, which stays.
    """
    if type(attributes) is not dict:  # orjson writes dicts only
        attributes = dict(attributes)
    return _without_nul(orjson.dumps(attributes, option=orjson.OPT_SORT_KEYS if sort else 0))


def json_list_bytes(items: Sequence[object]) -> bytes:
    """``items`` as a JSON array for a ``jsonb`` column, NULs as in :func:`json_bytes`."""
    return _without_nul(orjson.dumps(items))


def _without_nul(data: bytes) -> bytes:
    if b"\\u0000" in data:
        data = _JSON_NUL.sub(rb"\1\\ufffd", data)
    return data


def _hash(*parts: bytes) -> int:
    digest = hashlib.blake2b(digest_size=8)
    for part in parts:
        digest.update(len(part).to_bytes(4, "big"))
        digest.update(part)
    return int.from_bytes(digest.digest(), "big", signed=True)


@dataclass(frozen=True, slots=True)
class Resource:
    """A resource's canonical attributes (sorted-key JSON) and its id."""

    attributes: bytes
    id: int

    @classmethod
    def of(cls, attributes: Mapping[str, object]) -> Resource:
        canonical = json_bytes(attributes, sort=True)
        return cls(canonical, _hash(b"resource", canonical))


@dataclass(frozen=True, slots=True)
class Template:
    """A span template's content: resource id, span name, shared attributes (sorted-key
    JSON), and its id."""

    resource_id: int
    name: str
    attributes: bytes
    id: int

    @classmethod
    def of(cls, resource_id: int, name: str, attributes: Mapping[str, object]) -> Template:
        canonical = json_bytes(attributes, sort=True)
        key = _hash(b"template", resource_id.to_bytes(8, "big", signed=True), name.encode())
        return cls(
            resource_id, name, canonical, _hash(key.to_bytes(8, "big", signed=True), canonical)
        )


# Rows go in in id order: two ingest processes storing overlapping rows in different orders
# would each wait for the other's uncommitted row, a deadlock.
_ENSURE_RESOURCES: Final = f"""
INSERT INTO {RESOURCE} (id, attributes)
SELECT * FROM unnest(%(ids)s::int8[], %(attributes)s::text[]::jsonb[]) ORDER BY 1
ON CONFLICT (id) DO NOTHING
"""  # noqa: S608 - a constant table name, values are parameters
_RESOURCE_MISMATCHES: Final = f"""
SELECT r.id FROM {RESOURCE} r
JOIN unnest(%(ids)s::int8[], %(attributes)s::text[]::jsonb[]) AS u(id, attributes)
  ON u.id = r.id
WHERE r.attributes <> u.attributes
"""  # noqa: S608
_ENSURE_TEMPLATES: Final = f"""
INSERT INTO {SPAN_TEMPLATE} (id, resource_id, name, attributes)
SELECT * FROM unnest(
    %(ids)s::int8[], %(resources)s::int8[], %(names)s::text[], %(attributes)s::text[]::jsonb[]
) ORDER BY 1
ON CONFLICT (id) DO NOTHING
"""  # noqa: S608
_TEMPLATE_MISMATCHES: Final = f"""
SELECT t.id FROM {SPAN_TEMPLATE} t
JOIN unnest(
    %(ids)s::int8[], %(resources)s::int8[], %(names)s::text[], %(attributes)s::text[]::jsonb[]
) AS u(id, resource_id, name, attributes) ON u.id = t.id
WHERE (t.resource_id, t.name, t.attributes) <> (u.resource_id, u.name, u.attributes)
"""  # noqa: S608


def ensure_resources(conn: psycopg.Connection[Any], resources: Sequence[Resource]) -> None:
    """Store the ``resources`` not stored yet (committed when ``conn`` is in autocommit)."""
    params = {
        "ids": [r.id for r in resources],
        "attributes": [r.attributes.decode() for r in resources],
    }
    _ensure(conn, _ENSURE_RESOURCES, _RESOURCE_MISMATCHES, params)


def ensure_templates(conn: psycopg.Connection[Any], templates: Sequence[Template]) -> None:
    """Store the ``templates`` not stored yet; their resources must be stored already."""
    params = {
        "ids": [t.id for t in templates],
        "resources": [t.resource_id for t in templates],
        "names": [t.name for t in templates],
        "attributes": [t.attributes.decode() for t in templates],
    }
    _ensure(conn, _ENSURE_TEMPLATES, _TEMPLATE_MISMATCHES, params)


def _ensure(
    conn: psycopg.Connection[Any], insert: str, mismatches: str, params: dict[str, Any]
) -> None:
    if not params["ids"]:
        return
    conn.execute(insert, params)
    clashes = conn.execute(mismatches, params).fetchall()
    if clashes:
        raise TemplateCollision(f"ids {[row[0] for row in clashes]} hold other content")


def attributes_sql(span: str = "s", template: str = "t", resource: str = "r") -> str:
    """A span's whole attributes as one ``jsonb`` expression, over the joins of
    :func:`joins_sql`: ``resource || template || span``. Rows stored before templates (and
    rows tests write by hand) have no template and hold every attribute themselves."""
    return (
        f"coalesce({resource}.attributes, '{{}}'::jsonb)"
        f" || coalesce({template}.attributes, '{{}}'::jsonb) || {span}.attributes"
    )


def name_sql(span: str = "s", template: str = "t") -> str:
    """A span's name: its template's, else (rows without a template) its own."""
    return f"coalesce({template}.name, {span}.name)"


def attribute_sql(key: str, span: str = "s", template: str = "t", resource: str = "r") -> str:
    """The text of one attribute (``key`` an SQL expression) as ``->>`` would read it from
    :func:`attributes_sql`, without building the merged document: the first of span,
    template, resource that has the key (a JSON null there is no value)."""
    return (
        f"coalesce({span}.attributes -> {key}, {template}.attributes -> {key},"
        f" {resource}.attributes -> {key}) #>> '{{}}'"
    )


def joins_sql(span: str = "s", template: str = "t", resource: str = "r") -> str:
    """The joins that :func:`attributes_sql`, :func:`attribute_sql` and :func:`name_sql`
    read through."""
    return (
        f"LEFT JOIN {SPAN_TEMPLATE} {template} ON {template}.id = {span}.template_id"
        f" LEFT JOIN {RESOURCE} {resource} ON {resource}.id = {template}.resource_id"
    )

from django.db import migrations, models

# The lean span row (issue #16): resources and span templates stored once, columns ordered
# widest first so that no byte is lost to alignment, dictionary ids in 4 bytes, and an index
# set of exactly what queries use (see latencyboard/storage/span_templates.py and the
# storage notes in latencyboard/spans/models.py).
#
# Existing rows are moved into the new layout as they are: their names and whole attributes
# stay in the row with no template (readers merge ``resource || template || span`` and read a
# missing template as empty), so no attribute is rewritten and no history is lost. Column order
# cannot be changed in place, hence a new table: the old one and its day partitions are
# renamed, the new partitions get the same bounds, the rows are copied and the old table is
# dropped. Indexes are built after the copy (faster than maintained row by row).
TEMPLATES = """
CREATE TABLE spans_resource (id bigint PRIMARY KEY, attributes jsonb NOT NULL);
CREATE TABLE spans_spantemplate (
    id bigint PRIMARY KEY,
    resource_id bigint NOT NULL,
    name text NOT NULL,
    attributes jsonb NOT NULL
);
"""
RENAME_OLD = """
ALTER TABLE spans_span RENAME TO spans_span_old;
ALTER INDEX spans_span_pkey RENAME TO spans_span_old_pkey;
ALTER INDEX spans_span_pipeline_time RENAME TO spans_span_old_pipeline_time;
ALTER INDEX spans_span_batch RENAME TO spans_span_old_batch;
ALTER INDEX spans_span_roots RENAME TO spans_span_old_roots;
"""
LEAN_TABLE = """
CREATE TABLE spans_span (
    batch_id bigint NOT NULL,
    start_time timestamptz NOT NULL,
    duration_ns bigint NOT NULL CHECK (duration_ns >= 0),
    span_id bigint NOT NULL,
    parent_span_id bigint,
    template_id bigint,
    trace_id uuid NOT NULL,
    team_id integer NOT NULL,
    pipeline_id integer NOT NULL,
    stage_id integer NOT NULL,
    kind smallint NOT NULL,
    status_code smallint NOT NULL,
    is_root boolean NOT NULL,
    name text NOT NULL DEFAULT '',
    status_message text NOT NULL DEFAULT '',
    attributes jsonb NOT NULL DEFAULT '{}'
) PARTITION BY RANGE (start_time);
"""
MOVE_PARTITIONS = """
DO $$
DECLARE part record;
BEGIN
    FOR part IN
        SELECT c.relname, pg_get_expr(c.relpartbound, c.oid) AS bound
        FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
        WHERE i.inhparent = 'spans_span_old'::regclass
    LOOP
        EXECUTE format('ALTER TABLE %I RENAME TO %I', part.relname, part.relname || '_old');
        EXECUTE format('CREATE TABLE %I PARTITION OF spans_span %s', part.relname, part.bound);
    END LOOP;
END $$;
INSERT INTO spans_span (
    batch_id, start_time, duration_ns, span_id, parent_span_id, trace_id, team_id,
    pipeline_id, stage_id, kind, status_code, is_root, name, status_message, attributes
)
SELECT batch_id, start_time, duration_ns, span_id, parent_span_id, trace_id, team_id,
       pipeline_id, stage_id, kind, status_code, is_root, name, status_message, attributes
FROM spans_span_old;
DROP TABLE spans_span_old;
"""
# Each index and the queries it serves:
# - the primary key: the dedupe key of exactly-once storage (a retried export stores only
#   what is missing) and one trace's spans by trace id (waterfall);
# - spans_span_roots: trace search and root exemplars over a window, slowest first, from the
#   index alone (duration and status carried);
# - spans_span_stage_time: a stage's spans over a window (trace search by stage, stage
#   exemplars, the attribute keys offered as cohorts, rollup rebuilds); it replaces the
#   (pipeline_id, start_time) index that carried stage, trace id and duration (~89 B a span
#   against ~40 B): a search by stage now reads its matches' rows from the heap;
# - spans_span_batch: the fold's spans of its batches (block ranges: a few bytes a day).
INDEXES = """
ALTER TABLE spans_span ADD PRIMARY KEY (team_id, trace_id, span_id, start_time);
CREATE INDEX spans_span_roots ON spans_span (pipeline_id, start_time)
    INCLUDE (duration_ns, status_code) WHERE is_root;
CREATE INDEX spans_span_stage_time ON spans_span (pipeline_id, stage_id, start_time);
CREATE INDEX spans_span_batch ON spans_span USING brin (batch_id);
"""
# Values past the TOAST threshold (wide attributes) compress with lz4 where the server is
# built with it (faster than pglz at a similar ratio); the embedded PostgreSQL is not, and
# keeps pglz. Detected, not assumed.
LZ4 = """
DO $$
BEGIN
    ALTER TABLE spans_span ALTER COLUMN attributes SET COMPRESSION lz4;
    ALTER TABLE spans_spantemplate ALTER COLUMN attributes SET COMPRESSION lz4;
    ALTER TABLE spans_resource ALTER COLUMN attributes SET COMPRESSION lz4;
EXCEPTION WHEN feature_not_supported THEN
    RAISE NOTICE 'lz4 is not available: attributes keep the default TOAST compression';
END $$;
"""
# What Django's Span model reads: each span whole, name and attributes merged from its
# template and resource. PostgreSQL drops the joins from queries that read neither.
VIEW = """
CREATE VIEW spans_spanview AS
SELECT s.batch_id, s.start_time, s.duration_ns, s.span_id, s.parent_span_id, s.template_id,
       s.trace_id, s.team_id, s.pipeline_id, s.stage_id, s.kind, s.status_code, s.is_root,
       coalesce(t.name, s.name) AS name, s.status_message,
       coalesce(r.attributes, '{}'::jsonb) || coalesce(t.attributes, '{}'::jsonb)
           || s.attributes AS attributes
FROM spans_span s
LEFT JOIN spans_spantemplate t ON t.id = s.template_id
LEFT JOIN spans_resource r ON r.id = t.resource_id;
"""


class Migration(migrations.Migration):
    dependencies = [("spans", "0003_pipeline_time_covering")]

    operations = [
        migrations.RunSQL(
            TEMPLATES + RENAME_OLD + LEAN_TABLE + MOVE_PARTITIONS + INDEXES + LZ4 + VIEW
        ),
        migrations.AddField(
            model_name="span", name="template_id", field=models.BigIntegerField(null=True)
        ),
        migrations.AlterModelTable(name="span", table="spans_spanview"),
    ]

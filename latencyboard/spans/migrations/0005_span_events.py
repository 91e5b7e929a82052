from django.db import migrations

# Span events (issue #24) in a side table: one row per span that has events, so that a span
# without any stores exactly the bytes it did before. Keyed like the span row and partitioned
# by the span's start day with the same bounds, so a day of events is created, thinned and
# dropped with its day of spans (latencyboard/storage/partitions.py, thinning.py).
EVENTS_TABLE = """
CREATE TABLE spans_spanevents (
    start_time timestamptz NOT NULL,
    span_id bigint NOT NULL,
    trace_id uuid NOT NULL,
    team_id integer NOT NULL,
    dropped_events integer NOT NULL DEFAULT 0,
    events jsonb NOT NULL,
    PRIMARY KEY (team_id, trace_id, span_id, start_time)
) PARTITION BY RANGE (start_time);
DO $$
DECLARE part record;
BEGIN
    FOR part IN
        SELECT c.relname, pg_get_expr(c.relpartbound, c.oid) AS bound
        FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
        WHERE i.inhparent = 'spans_span'::regclass
    LOOP
        EXECUTE format(
            'CREATE TABLE %I PARTITION OF spans_spanevents %s',
            replace(part.relname, 'spans_span_p', 'spans_spanevents_p'),
            part.bound
        );
    END LOOP;
END $$;
"""


class Migration(migrations.Migration):
    dependencies = [("spans", "0004_lean_row")]

    operations = [
        migrations.RunSQL(EVENTS_TABLE, reverse_sql="DROP TABLE spans_spanevents"),
    ]

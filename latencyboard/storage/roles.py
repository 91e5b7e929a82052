"""The application's database role: it owns the tables it works on, never the audit log.

Migrations run as an owner role (``DATABASE_MIGRATION_URL``: in ``make run`` and the tests
the server's superuser, in Docker Compose ``POSTGRES_USER``), which then hands every table,
view, sequence and function of the schema to the application role (``DATABASE_URL``'s user),
which must not be a superuser: it creates and drops span partitions, truncates them when it
thins a day, and runs every query. The audit log's table and its guard functions stay the
owner's; the application may only read and append to it. So the application cannot drop the
guard's triggers, truncate, update or delete the log, whatever SQL it is made to run.

Pure of Django: it takes a psycopg cursor of the owner's connection.
"""

from __future__ import annotations

from typing import Final

import psycopg
from psycopg import sql

from latencyboard.storage.audit_log import AUDIT_EVENT

AUDIT_FUNCTIONS: Final = ("audit_log_refuse_change", "audit_log_refuse_truncate")

# Tables, partitions, views and sequences of the schema that no column owns (an identity
# sequence follows its table), but the audit log's.
_RELATIONS: Final = """
SELECT c.relname, c.relkind FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'p', 'v', 'm', 'S')
  AND c.relname <> %(audit)s
  AND (c.relkind <> 'S' OR NOT EXISTS (SELECT 1 FROM pg_depend d
       WHERE d.classid = 'pg_class'::regclass AND d.objid = c.oid AND d.deptype IN ('a', 'i')))
ORDER BY c.relname
"""
_FUNCTIONS: Final = """
SELECT p.oid::regprocedure::text FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
WHERE n.nspname = current_schema() AND NOT (p.proname = ANY(%(audit)s))
"""
_KEYWORD: Final = {
    "r": "TABLE",
    "p": "TABLE",
    "v": "VIEW",
    "m": "MATERIALIZED VIEW",
    "S": "SEQUENCE",
}


class SuperuserRoleError(ValueError):
    pass


def ensure_role(cursor: psycopg.Cursor, role: str, password: str | None) -> None:
    """Create the login role ``role`` if it does not exist (with ``password``, if given)."""
    cursor.execute("SELECT rolsuper FROM pg_roles WHERE rolname = %s", [role])
    found = cursor.fetchone()
    if found is None:
        statement = sql.SQL("CREATE ROLE {} LOGIN NOSUPERUSER NOCREATEROLE NOCREATEDB").format(
            sql.Identifier(role)
        )
        if password:
            statement += sql.SQL(" PASSWORD {}").format(sql.Literal(password))
        cursor.execute(statement)
    elif found[0]:
        raise SuperuserRoleError(f"the application role {role} is a superuser")


def hand_over(cursor: psycopg.Cursor, role: str) -> None:
    """Give ``role`` what the application needs, and the owner the audit log (run as the
    owner, after migrating)."""
    app = sql.Identifier(role)
    cursor.execute(sql.SQL("GRANT USAGE, CREATE ON SCHEMA public TO {}").format(app))
    cursor.execute(
        sql.SQL("GRANT CONNECT, TEMPORARY ON DATABASE {} TO {}").format(
            sql.Identifier(_current_database(cursor)), app
        )
    )
    for name, kind in cursor.execute(_RELATIONS, {"audit": AUDIT_EVENT}).fetchall():
        cursor.execute(
            sql.SQL("ALTER {} {} OWNER TO {}").format(
                sql.SQL(_KEYWORD[kind]), sql.Identifier(name), app
            )
        )
    for (function,) in cursor.execute(_FUNCTIONS, {"audit": list(AUDIT_FUNCTIONS)}).fetchall():
        cursor.execute(sql.SQL("ALTER FUNCTION {} OWNER TO {}").format(sql.SQL(function), app))
    audit = sql.Identifier(AUDIT_EVENT)
    cursor.execute(sql.SQL("ALTER TABLE {} OWNER TO CURRENT_USER").format(audit))
    for function in AUDIT_FUNCTIONS:
        cursor.execute(
            sql.SQL("ALTER FUNCTION {}() OWNER TO CURRENT_USER").format(sql.Identifier(function))
        )
    cursor.execute(sql.SQL("REVOKE ALL ON {} FROM {}").format(audit, app))
    cursor.execute(sql.SQL("GRANT SELECT, INSERT ON {} TO {}").format(audit, app))


def _current_database(cursor: psycopg.Cursor) -> str:
    row = cursor.execute("SELECT current_database()").fetchone()
    assert row is not None
    return str(row[0])

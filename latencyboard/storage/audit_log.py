"""The audit log's guard: PostgreSQL itself refuses to change or remove a recorded event.

A row trigger raises on UPDATE and DELETE, a statement trigger on TRUNCATE. TRUNCATE is let
through only in a session that sets ``latencyboard.audit_log_truncate`` to ``allow``: the test
suite's between-test flush does (tests/conftest.py); the application never does. Whoever owns
the table can still drop the triggers: this guards against the application and its users, not
against the database owner.
"""

from __future__ import annotations

from typing import Final

AUDIT_EVENT: Final = "audits_auditevent"
TRUNCATE_SETTING: Final = "latencyboard.audit_log_truncate"

INSTALL_GUARD: Final = f"""
CREATE FUNCTION audit_log_refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'the audit log is append-only: % refused', TG_OP
        USING ERRCODE = 'insufficient_privilege';
END;
$$;

CREATE FUNCTION audit_log_refuse_truncate() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF coalesce(current_setting('{TRUNCATE_SETTING}', true), '') <> 'allow' THEN
        RAISE EXCEPTION 'the audit log is append-only: TRUNCATE refused'
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    RETURN NULL;
END;
$$;

CREATE TRIGGER audit_log_no_update_delete BEFORE UPDATE OR DELETE ON {AUDIT_EVENT}
    FOR EACH ROW EXECUTE FUNCTION audit_log_refuse_change();
CREATE TRIGGER audit_log_no_truncate BEFORE TRUNCATE ON {AUDIT_EVENT}
    FOR EACH STATEMENT EXECUTE FUNCTION audit_log_refuse_truncate();
"""

REMOVE_GUARD: Final = f"""
DROP TRIGGER audit_log_no_truncate ON {AUDIT_EVENT};
DROP TRIGGER audit_log_no_update_delete ON {AUDIT_EVENT};
DROP FUNCTION audit_log_refuse_truncate();
DROP FUNCTION audit_log_refuse_change();
"""

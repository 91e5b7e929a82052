"""Chain the audit log: every event gets its sequence number and hash, the existing ones in
the order they were appended (by id)."""

from typing import Any

from django.db import migrations, models

from audits import chain
from latencyboard.storage.audit_log import AUDIT_EVENT

_GUARD = "audit_log_no_update_delete"


def chain_existing(apps: Any, schema_editor: Any) -> None:
    events = apps.get_model("audits", "AuditEvent").objects.order_by("id")
    previous = chain.GENESIS
    with schema_editor.connection.cursor() as cursor:
        cursor.execute(f"ALTER TABLE {AUDIT_EVENT} DISABLE TRIGGER {_GUARD}")
        for seq, row in enumerate(events.values("id", *chain.FIELDS).iterator(), start=1):
            previous = chain.row_hash(previous, seq, row)
            cursor.execute(
                f"UPDATE {AUDIT_EVENT} SET seq = %s, hash = %s WHERE id = %s",  # noqa: S608
                [seq, previous, row["id"]],
            )
        cursor.execute(f"ALTER TABLE {AUDIT_EVENT} ENABLE TRIGGER {_GUARD}")


class Migration(migrations.Migration):
    dependencies = [
        ("audits", "0002_report_cut_off_and_signing_key"),
    ]

    operations = [
        migrations.AddField(
            model_name="auditevent",
            name="seq",
            field=models.BigIntegerField(
                null=True, help_text="Its place in the hash chain: 1, 2, 3…"
            ),
        ),
        migrations.AddField(
            model_name="auditevent",
            name="hash",
            field=models.CharField(
                max_length=64,
                null=True,
                help_text="SHA-256 of the previous event's hash and this event (audits.chain).",
            ),
        ),
        migrations.RunPython(chain_existing, migrations.RunPython.noop),
        migrations.AlterField(
            model_name="auditevent",
            name="seq",
            field=models.BigIntegerField(
                unique=True, help_text="Its place in the hash chain: 1, 2, 3…"
            ),
        ),
        migrations.AlterField(
            model_name="auditevent",
            name="hash",
            field=models.CharField(
                max_length=64,
                help_text="SHA-256 of the previous event's hash and this event (audits.chain).",
            ),
        ),
    ]

"""A channel's kind is checked against the registry of kinds where it is written (form, API,
admin), not by choices fixed in a migration: a new kind is one module and no migration.
Stored kinds are kept as they are; the column does not change."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("alerts", "0006_delivery_sending"),
    ]

    operations = [
        migrations.AlterField(
            model_name="channel",
            name="kind",
            field=models.CharField(max_length=16),
        ),
    ]

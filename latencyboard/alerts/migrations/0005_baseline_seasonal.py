"""Baselines say whether they are the same hours of the previous days (seasonal) or the
trailing window."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("alerts", "0004_incidents")]

    operations = [
        migrations.AddField(
            model_name="baseline",
            name="seasonal",
            field=models.BooleanField(default=False),
        ),
    ]

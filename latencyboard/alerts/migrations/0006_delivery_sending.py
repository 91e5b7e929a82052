"""A delivery a worker has claimed and is sending is marked so: other workers see which
teams' receivers hold the notifier's slots."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("alerts", "0005_baseline_seasonal")]

    operations = [
        migrations.AlterField(
            model_name="delivery",
            name="status",
            field=models.CharField(
                choices=[
                    ("pending", "Pending"),
                    ("sending", "Sending"),
                    ("delivered", "Delivered"),
                    ("retrying", "Retrying"),
                    ("failed", "Failed"),
                ],
                default="pending",
                max_length=16,
            ),
        ),
    ]

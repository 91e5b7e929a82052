"""Incidents: each alert joins the open incident of its pipeline. Existing open alerts of one
pipeline become one incident; each resolved alert its own."""

import django.db.models.deletion
from django.db import migrations, models

OPEN = ("firing", "acknowledged")


def group_alerts(apps, schema_editor):
    Alert = apps.get_model("alerts", "Alert")
    Incident = apps.get_model("alerts", "Incident")
    open_incidents = {}
    for alert in Alert.objects.order_by("started_at", "pk").iterator():
        if alert.status in OPEN:
            incident = open_incidents.get(alert.pipeline_id)
            if incident is None:
                incident = Incident.objects.create(
                    pipeline_id=alert.pipeline_id,
                    status=alert.status,
                    title=alert.summary,
                    opened_at=alert.started_at,
                )
                open_incidents[alert.pipeline_id] = incident
        else:
            incident = Incident.objects.create(
                pipeline_id=alert.pipeline_id,
                status=alert.status,
                title=alert.summary,
                opened_at=alert.started_at,
                resolved_at=alert.resolved_at,
            )
        Alert.objects.filter(pk=alert.pk).update(incident=incident)


class Migration(migrations.Migration):
    dependencies = [
        ("alerts", "0003_delivery_plural_name"),
        ("pipelines", "0001_initial"),
    ]

    operations = [
        migrations.CreateModel(
            name="Incident",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                (
                    "status",
                    models.CharField(
                        choices=[
                            ("firing", "Firing"),
                            ("acknowledged", "Acknowledged"),
                            ("resolved", "Resolved"),
                        ],
                        max_length=16,
                    ),
                ),
                ("title", models.CharField(max_length=500)),
                ("opened_at", models.DateTimeField()),
                ("resolved_at", models.DateTimeField(blank=True, null=True)),
                (
                    "pipeline",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="incidents",
                        to="pipelines.pipeline",
                    ),
                ),
            ],
            options={"ordering": ["-opened_at", "-id"]},
        ),
        migrations.AddField(
            model_name="alert",
            name="current",
            field=models.JSONField(blank=True, default=dict),
        ),
        migrations.AddField(
            model_name="alert",
            name="current_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="alert",
            name="incident",
            field=models.ForeignKey(
                null=True,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="alerts",
                to="alerts.incident",
            ),
        ),
        migrations.RunPython(group_alerts, migrations.RunPython.noop),
        migrations.AlterField(
            model_name="alert",
            name="incident",
            field=models.ForeignKey(
                on_delete=django.db.models.deletion.CASCADE,
                related_name="alerts",
                to="alerts.incident",
            ),
        ),
        migrations.AddConstraint(
            model_name="incident",
            constraint=models.UniqueConstraint(
                condition=models.Q(("status__in", ["firing", "acknowledged"])),
                fields=("pipeline",),
                name="incident_one_open_per_pipeline",
            ),
        ),
    ]

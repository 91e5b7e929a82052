from django.db import migrations


class Migration(migrations.Migration):
    """The admin lists "Deliveries", not Django's guess "Deliverys"."""

    dependencies = [("alerts", "0002_send_test_deliveries")]

    operations = [
        migrations.AlterModelOptions(
            name="delivery",
            options={"ordering": ["id"], "verbose_name_plural": "deliveries"},
        ),
    ]

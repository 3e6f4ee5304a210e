"""Activity now belongs to core (core 0001 took it over); its table stays as it is."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("monitoring", "0007_merge_name_checks_and_heartbeat"),
        ("core", "0001_activity_from_monitoring"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[migrations.DeleteModel(name="Activity")],
            database_operations=[],
        ),
    ]

"""Activity moves from monitoring to core, its table and rows untouched: only Django's idea
of which app owns it changes (monitoring 0008 drops it from monitoring's state)."""

from django.db import migrations, models


class Migration(migrations.Migration):
    initial = True

    # The table was created by monitoring's migrations.
    dependencies = [
        ("monitoring", "0007_merge_name_checks_and_heartbeat"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name="Activity",
                    fields=[
                        ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                        ("name", models.SlugField(unique=True)),
                        ("holder", models.CharField(blank=True, help_text="Who holds the lease.", max_length=100)),
                        ("lease_expires", models.DateTimeField(blank=True, null=True)),
                        ("last_success_at", models.DateTimeField(blank=True, null=True)),
                        ("last_summary", models.CharField(blank=True, max_length=255)),
                        ("last_error_at", models.DateTimeField(blank=True, null=True)),
                        ("last_error", models.TextField(blank=True)),
                    ],
                    options={
                        "verbose_name_plural": "activities",
                        "db_table": "monitoring_activity",
                        "ordering": ["name"],
                    },
                ),
            ],
            database_operations=[],
        ),
    ]

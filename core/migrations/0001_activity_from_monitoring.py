"""Activity moves from monitoring to core, its table and rows untouched: only Django's idea
of which app owns it changes (monitoring 0008 drops it from monitoring's state). Its content
type is renamed, so the permissions on it, which admins may have given, stay given."""

from collections.abc import Callable

from django.db import migrations, models
from django.db.backends.base.schema import BaseDatabaseSchemaEditor
from django.db.migrations.state import StateApps


def move_content_type(
    source: str, target: str
) -> Callable[[StateApps, BaseDatabaseSchemaEditor], None]:
    """Activity's content type from app ``source`` to ``target`` (none yet on a new database:
    Django creates content types after migrating)."""

    def move(apps: StateApps, schema_editor: BaseDatabaseSchemaEditor) -> None:
        content_types = apps.get_model("contenttypes", "ContentType").objects
        rows = content_types.using(schema_editor.connection.alias)
        rows.filter(app_label=source, model="activity").update(app_label=target)

    return move


class Migration(migrations.Migration):
    initial = True

    # The table was created by monitoring's migrations.
    dependencies = [
        ("monitoring", "0007_merge_name_checks_and_heartbeat"),
        ("contenttypes", "0002_remove_content_type_name"),
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
        migrations.RunPython(
            move_content_type("monitoring", "core"), move_content_type("core", "monitoring")
        ),
    ]

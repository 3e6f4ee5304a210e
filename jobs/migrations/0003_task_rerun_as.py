import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("jobs", "0002_task_actions_and_stored_logs"),
    ]

    operations = [
        migrations.AddField(
            model_name="task",
            name="rerun_as",
            field=models.OneToOneField(
                blank=True,
                null=True,
                on_delete=django.db.models.deletion.SET_NULL,
                related_name="rerun_of",
                to="jobs.task",
            ),
        ),
    ]

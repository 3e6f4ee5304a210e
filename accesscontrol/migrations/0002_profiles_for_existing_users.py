"""Give users created before access control existed a profile (new ones get it on creation)."""

import re

from django.conf import settings
from django.db import migrations

UNIX_NAME = r"^[a-z_][a-z0-9_.\-]*\$?$"


def create_profiles(apps, schema_editor):
    User = apps.get_model(*settings.AUTH_USER_MODEL.split("."))
    Profile = apps.get_model("accesscontrol", "Profile")
    for user in User.objects.filter(profile__isnull=True):
        name = user.username if re.match(UNIX_NAME, user.username) else ""
        Profile.objects.create(user=user, unix_username=name)


class Migration(migrations.Migration):
    dependencies = [
        ("accesscontrol", "0001_initial"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [migrations.RunPython(create_profiles, migrations.RunPython.noop)]

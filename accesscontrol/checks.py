"""What an upgrade left for the admin, as system check warnings with the ``upgrade`` tag:
``doctor``, ``check --database default --tag upgrade`` (deploy/upgrade.sh) and ``/healthz``
read them through Django's check registry, so monitoring imports nothing of this app."""

from django.core import checks
from django.db import connections

from monitoring.dbversion import UPGRADE_TAG

from .models import UpgradeNote


@checks.register(checks.Tags.database, UPGRADE_TAG)
def check_upgrade_notes(app_configs=None, databases=None, **kwargs):
    found = []
    for alias in databases or ():
        # Before the table exists (``migrate`` checks before it migrates) there is no note.
        if UpgradeNote._meta.db_table not in connections[alias].introspection.table_names():
            continue
        for note in UpgradeNote.objects.using(alias).open():
            found.append(
                checks.Warning(
                    note.text,
                    hint="Admin › Notes left by an upgrade lists them; delete one once decided.",
                    obj=f"upgrade note {note.pk}",
                    id="accesscontrol.W001",
                )
            )
    return found

"""Whether this code may run on its database: a version started on a database that a newer
version migrated refuses, with a message, instead of misreading rows or failing later in a
worker ("... is not defined") without saying why.

A migration of one of our apps that the database lists as applied but this code does not have
can only come from a newer version (or a branch this one lacks). Registered as a system check
with the ``database`` and ``upgrade`` tags, so ``migrate``, ``check --database default`` (run
before ``serve`` and ``workers`` start, and before each systemd web process), ``doctor`` and
``/healthz`` all ask this one function.
"""

from functools import cache
from pathlib import Path

from django.apps import apps
from django.conf import settings
from django.core import checks
from django.db import DatabaseError, connections

UPGRADE_TAG = "upgrade"  # the checks doctor and /healthz run: what an upgrade left or broke


def our_apps() -> frozenset[str]:
    """Labels of this project's apps (top-level packages of the checkout, not of the venv)."""
    base = Path(settings.BASE_DIR).resolve()
    return frozenset(
        app.label for app in apps.get_app_configs() if Path(app.path).resolve().parent == base
    )


@cache
def known_migrations() -> frozenset[tuple[str, str]]:
    """Every migration this code has, and those its squashed migrations replace (their files
    may be gone while the database still lists them)."""
    from django.db.migrations.loader import MigrationLoader  # here: only when a check runs

    loader = MigrationLoader(None, ignore_no_migrations=True)  # the files only, no database
    known = set(loader.disk_migrations)
    for migration in loader.disk_migrations.values():
        known.update(migration.replaces)
    return frozenset(known)


def unknown_applied(alias: str = "default") -> list[str]:
    """Our apps' migrations applied to the database that this code does not know."""
    from django.db.migrations.recorder import MigrationRecorder

    recorder = MigrationRecorder(connections[alias])
    if not recorder.has_table():
        return []  # a new database: nothing applied yet
    ours, known = our_apps(), known_migrations()
    applied = [key for key in recorder.applied_migrations() if key[0] in ours]
    return sorted(f"{app}.{name}" for app, name in applied if (app, name) not in known)


def newer_database_error(unknown: list[str]) -> checks.Error:
    shown = ", ".join(unknown[:5]) + (f" and {len(unknown) - 5} more" if len(unknown) > 5 else "")
    return checks.Error(
        "The database was migrated by a newer version of GPU Hive: it has migrations this "
        f"code does not know ({shown}). This version would misread its data, so it does not "
        "start.",
        hint="Run the newer version again, or restore the backup taken before the upgrade "
        "(deploy/restore.sh) to run this one.",
        id="monitoring.E003",
    )


@checks.register(checks.Tags.database, UPGRADE_TAG)
def check_database_not_newer(app_configs=None, databases=None, **kwargs):
    found = []
    for alias in databases or ():
        try:
            unknown = unknown_applied(alias)
        except DatabaseError as exc:
            found.append(
                checks.Warning(
                    f"Could not read which migrations the database has: {exc}",
                    hint="Check DATABASE_URL and that the database server runs.",
                    id="monitoring.W003",
                )
            )
            continue
        if unknown:
            found.append(newer_database_error(unknown))
    return found

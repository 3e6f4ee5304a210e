"""What an upgrade leaves for the admin, and a database that a newer version migrated: named
by ``doctor`` and ``check --tag upgrade``, counted by /healthz; the newer database refused by
``migrate``, the checks run before ``serve`` and ``workers``, and ``doctor``."""

import io
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command
from django.db import connection
from django.db.migrations.recorder import MigrationRecorder

from accesscontrol.models import HostAccount, UpgradeNote
from accesscontrol.services import profile_for
from monitoring.models import Host

ROOT = Path(__file__).resolve().parents[2]
NEWER = "The database was migrated by a newer version of GPU Hive"


@pytest.fixture
def note_about(db):
    def make(user, kind=UpgradeNote.Kind.UNIX_NAME):
        return UpgradeNote.objects.create(kind=kind, user=user, text=f"decide about {user}")

    return make


def doctor() -> str:
    out = io.StringIO()
    call_command("doctor", stdout=out)
    return out.getvalue()


def test_a_name_note_is_open_until_the_user_has_an_account(note_about, owner, other_user):
    note = note_about(owner)
    host_note = note_about(other_user)
    allowance_note = note_about(None, UpgradeNote.Kind.RUN_AS)
    assert set(UpgradeNote.objects.open()) == {note, host_note, allowance_note}
    profile = profile_for(owner)
    profile.unix_username = "alice2"
    profile.save()
    host = Host.objects.create(name="gpu9", address="127.0.0.9")
    HostAccount.objects.create(profile=profile_for(other_user), host=host, unix_username="bo")
    assert list(UpgradeNote.objects.open()) == [allowance_note]


def test_doctor_names_open_notes_as_warnings_and_passes(note_about, owner):
    profile = profile_for(owner)
    profile.unix_username = ""
    profile.save()
    note_about(owner)
    out = doctor()
    assert f"WARN decide about {owner}" in out
    assert "Notes left by an upgrade" in out
    assert out.strip().endswith("all checks passed, 1 warning(s)")


def test_doctor_without_notes_says_nothing_about_upgrades(db):
    assert doctor().strip() == "all checks passed"


def test_healthz_counts_the_notes_and_stays_healthy_for_them(client, note_about, owner):
    note_about(owner)
    body = client.get("/healthz").json()
    assert body["checks"]["upgrade"] == {"ok": True, "left_for_admin": 1}


@pytest.fixture
def newer_migration(db):
    """The database lists a migration of ours that this code does not have."""
    MigrationRecorder(connection).record_applied("jobs", "9999_from_a_newer_version")


def test_healthz_fails_on_a_database_a_newer_version_migrated(client, newer_migration):
    response = client.get("/healthz")
    assert response.status_code == 503
    assert response.json()["checks"]["upgrade"] == {"ok": False, "left_for_admin": 0}
    assert "9999" not in response.content.decode()  # monitors get yes/no, not the names


def test_doctor_refuses_on_a_database_a_newer_version_migrated(newer_migration):
    out = io.StringIO()
    with pytest.raises(CommandError, match="cannot run on this database; no host was checked"):
        call_command("doctor", stdout=out)
    assert f"FAIL {NEWER}" in out.getvalue()
    assert "jobs.9999_from_a_newer_version" in out.getvalue()


def test_an_unknown_migration_of_a_library_is_not_ours_to_judge(client, db):
    MigrationRecorder(connection).record_applied("django_q", "9999_newer_library")
    assert client.get("/healthz").json()["checks"]["upgrade"]["ok"] is True


def manage(env, *args):
    return subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), *args],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )


def service_env(data: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
    return {**env, "HIVE_DATA_DIR": str(data), "DJANGO_SETTINGS_MODULE": "hiveproject.settings"}


@pytest.fixture(scope="module")
def newer_database(tmp_path_factory) -> Path:
    """A database this code migrated, on which a newer version then recorded a migration."""
    data = tmp_path_factory.mktemp("newer")
    assert manage(service_env(data), "migrate", "-v0").returncode == 0
    database = sqlite3.connect(data / "hive.sqlite3")
    with database:
        database.execute(
            "INSERT INTO django_migrations (app, name, applied) "
            "VALUES ('reservations', '9999_newer', CURRENT_TIMESTAMP)"
        )
    database.close()  # the last connection: its write-ahead log goes into the file we copy
    return data / "hive.sqlite3"


@pytest.mark.parametrize("command", ["migrate", "workers", "serve"])
def test_a_newer_database_stops_the_start_with_a_clear_message(tmp_path, newer_database, command):
    shutil.copyfile(newer_database, tmp_path / "hive.sqlite3")
    done = manage(service_env(tmp_path), command)
    assert done.returncode == 1, done.stdout + done.stderr
    assert NEWER in done.stderr and "reservations.9999_newer" in done.stderr
    assert "Serving on" not in done.stdout and "Workers stopped" not in done.stdout

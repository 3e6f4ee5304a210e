"""A lab's database made by the release of commit 1984f12 (tests/fixtures/upgrade, built by that
release's code), migrated by this code as an upgrade does (docs/operating.md, Upgrades): its
bookings, grants, accounts, jobs and tokens mean what they meant, and what the upgrade could
not decide is listed for the admin (doctor, ``check --tag upgrade``).

Before migration accesscontrol.0004 an empty UNIX name meant "the account named like the
user", and jobs on localhost ran as the service's own account ('hivesvc' in that lab)."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests/fixtures/upgrade"
FACTS = json.loads((FIXTURE / "facts.json").read_text())
LEFT_FOR_ADMIN = {"root", "daemon"}  # root, and a system account here (UID 1 in Debian)


def manage(env, *args, check=True):
    done = subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), *args],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=240,
    )
    if check:
        assert done.returncode == 0, done.stdout + done.stderr
    return done


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """The old lab's database, migrated; the service runs as that lab's service account."""
    data = tmp_path_factory.mktemp("upgraded-lab")
    shutil.copyfile(FIXTURE / "hive-1984f12.sqlite3", data / "hive.sqlite3")
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
    env.update(
        HIVE_DATA_DIR=str(data),
        LOGNAME=FACTS["service_account"],  # what getpass.getuser() reads first
        DJANGO_SETTINGS_MODULE="hiveproject.settings",
    )
    manage(env, "migrate", "--no-input", "-v0")
    return env


@pytest.fixture(scope="module")
def meaning(lab):
    done = manage(lab, "shell", "-c", "from tests.upgrade.meaning import main; main()")
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_every_account_is_the_one_the_old_release_ran_as(meaning):
    for where, old_name in FACTS["old_unix_names"].items():
        user = where.split("@")[0]
        if user in LEFT_FOR_ADMIN:
            assert meaning["run_as"][where][0] == "refused", where
            assert "has no UNIX account name" in meaning["run_as"][where][1]
        else:
            assert meaning["run_as"][where][0] == old_name, where


def test_empty_names_and_missing_profiles_became_the_user_name(meaning):
    assert meaning["run_as"]["alice@gpu1"] == ["alice", 1000]  # cleared by an admin
    assert meaning["run_as"]["dave@gpu1"] == ["dave", 1000]  # no profile at all
    assert meaning["run_as"]["bob@gpu1"] == ["robert", 1000]  # set: kept as it was


def test_the_service_account_stays_allowed_where_jobs_ran_as_it_and_nowhere_else(meaning):
    service = FACTS["service_account"]
    assert meaning["run_as"]["carol@localhost"] == [service, 0]  # allowed: no UID floor
    assert meaning["run_as"]["carol@gpu1"] == ["carol", 1000]


def test_the_scheduled_job_can_start_in_its_booking(meaning):
    assert meaning["start"] == "starts as alice"


def test_the_owners_process_on_her_booking_is_not_an_intrusion(meaning):
    assert meaning["intruders"] == [[202, "mallory"]]


def test_bookings_and_tokens_are_unchanged(meaning):
    start, end = FACTS["booking"]
    assert meaning["reservations"] == [
        ["alice", "confirmed", start, end, ["GPU-old-0"]],
        ["bob", "confirmed", start, end, ["GPU-old-1"]],
    ]
    assert meaning["token_user"] == "alice"


def test_root_and_system_accounts_and_the_allowance_are_listed_for_the_admin(lab, meaning):
    assert meaning["notes"] == [["run as", None], ["unix name", "daemon"], ["unix name", "root"]]
    done = manage(lab, "check", "--database", "default", "--tag", "upgrade")
    assert "System check identified 3 issues" in done.stdout + done.stderr
    assert "User root has an empty UNIX name" in done.stderr
    assert f"Jobs ran as '{FACTS['service_account']}'" in done.stderr

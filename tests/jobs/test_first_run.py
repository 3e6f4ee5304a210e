"""A fresh clone's first run on one machine: `init`, then a job on `localhost` runs as its
owner's own UNIX account (its files are that account's), with no SSH set up at all.

As root the service switches to the owner's account (setpriv, the environment reset as an SSH
login would give it); as a normal user it can run tasks only as itself, and `init` says how
to reach the machine over SSH instead."""

import os
import pwd
import shutil
import subprocess
import sys
import uuid
from io import StringIO
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command

from jobs import services
from jobs.models import Task
from monitoring.models import Device, Host
from tests.realparts import require

from .conftest import wait_for

OWNER = "gpuhive-taskowner"  # a UNIX account of its own, made here when missing
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def unix_owner():
    require(os.geteuid() == 0, "switching to another UNIX account needs root")
    require(shutil.which("screen") is not None, "GNU screen is not installed")
    try:
        return pwd.getpwnam(OWNER)
    except KeyError:
        subprocess.run(["useradd", "--create-home", "--shell", "/bin/sh", OWNER], check=True)
        return pwd.getpwnam(OWNER)


@pytest.fixture
def owner_logs(unix_owner, settings):
    """Task files in the owner's home (``~/`` is resolved there, as over SSH)."""
    name = f".gpuhive-test-{uuid.uuid4().hex[:8]}"
    settings.JOBS_LOG_DIR = f"~/{name}"
    yield Path(unix_owner.pw_dir) / name
    shutil.rmtree(Path(unix_owner.pw_dir) / name, ignore_errors=True)


def init(*args) -> str:
    out = StringIO()
    call_command("init", "--no-input", *args, stdout=out)
    return out.getvalue()


def test_as_root_a_job_on_localhost_runs_as_its_owner(db, unix_owner, owner_logs, monkeypatch):
    said = init("--admin", "chief", "--admin-password", "pw-chief-1")
    assert "Tasks on 'localhost' run as each user's own UNIX account." in said
    localhost = Host.objects.get(name="localhost")
    assert localhost.is_local
    gpu = Device.objects.create(host=localhost, index=0, uuid="GPU-local-0", name="Tesla T4")
    user = get_user_model().objects.create_user(OWNER, "o@example.org", "pw-owner-1")
    monkeypatch.setenv("HIVE_SERVICE_SECRET", "not for tasks")  # the service's environment

    script = f"id -un > {owner_logs.name}/whoami.txt; pwd; env"
    spec = services.TaskSpec(host=localhost, template=script, devices=[gpu])
    task = services.create_job(user, name="first", specs=[spec]).tasks.get()
    task = services.spawn_task(task, user)
    assert task.unix_username == OWNER
    assert wait_for(lambda: services.sync_tasks([task]) or task_status(task) in Task.ENDED)
    task.refresh_from_db()
    assert (task.status, task.exit_code) == (Task.Status.EXITED, 0), task.error

    made = owner_logs / "whoami.txt"
    assert made.read_text().strip() == OWNER
    assert made.stat().st_uid == unix_owner.pw_uid  # the owner's file, not root's
    log = Path(task.log_path).read_text()
    assert Path(task.log_path).stat().st_uid == unix_owner.pw_uid
    assert f"\n{unix_owner.pw_dir}\n" in f"\n{log}"  # started in the owner's home
    assert f"USER={OWNER}" in log and "CUDA_VISIBLE_DEVICES=GPU-local-0" in log
    assert "HIVE_SERVICE_SECRET" not in log  # the environment was reset, as over SSH


def test_as_root_a_user_without_an_account_here_is_told_before_anything_runs(db):
    require(os.geteuid() == 0, "switching to another UNIX account needs root")
    init("--admin", "chief", "--admin-password", "pw-chief-1")
    localhost = Host.objects.get(name="localhost")
    user = get_user_model().objects.create_user("gpuhive-nobody", "n@example.org", "pw-nob-1")
    spec = services.TaskSpec(host=localhost, template="true")
    task = services.create_job(user, name="none", specs=[spec]).tasks.get()
    with pytest.raises(Exception, match="localhost has no UNIX account 'gpuhive-nobody'"):
        services.spawn_task(task, user)
    assert task_status(task) == Task.Status.PENDING


def test_init_maps_the_first_admin_to_whoever_ran_it(db, monkeypatch):
    monkeypatch.setenv("SUDO_USER", "alice")
    said = init("--admin", "chief", "--admin-password", "pw-chief-1")
    assert "Admin 'chief' runs tasks as UNIX account 'alice'." in said
    chief = get_user_model().objects.get(username="chief")
    assert chief.profile.unix_username == "alice"


def test_init_never_maps_the_admin_to_root(db, monkeypatch):
    monkeypatch.delenv("SUDO_USER", raising=False)
    said = init("--admin", "chief", "--admin-password", "pw-chief-1", "--admin-unix-user", "root")
    assert "tasks never run as root by default" in said
    assert get_user_model().objects.get(username="chief").profile.unix_username == "chief"


def task_status(task: Task) -> str:
    task.refresh_from_db()
    return task.status


# --- as a normal user: a fresh data directory, the service run as that account ---------------


def as_owner(unix_owner, data_dir: Path, *argv) -> subprocess.CompletedProcess:
    """manage.py run as the owner's account, with the data directory of a fresh install."""
    env = {
        "PATH": os.environ["PATH"],
        "HOME": unix_owner.pw_dir,
        "HIVE_DATA_DIR": str(data_dir),
        "DJANGO_SETTINGS_MODULE": "hiveproject.settings",
    }
    switch = ["setpriv", f"--reuid={unix_owner.pw_uid}", f"--regid={unix_owner.pw_gid}"]
    command = [*switch, "--init-groups", "--", sys.executable, str(ROOT / "manage.py"), *argv]
    return subprocess.run(command, env=env, cwd=ROOT, capture_output=True, text=True, timeout=300)


RUN_A_JOB = """
from django.contrib.auth import get_user_model
from jobs import services
from jobs.models import Task
from monitoring.models import Host
import time
user = get_user_model().objects.get(username="chief")
spec = services.TaskSpec(host=Host.objects.get(name="localhost"), template="id -un > mine.txt")
task = services.create_job(user, name="first", specs=[spec]).tasks.get()
task = services.spawn_task(task, user)
for _ in range(100):
    services.sync_tasks([task]); task.refresh_from_db()
    if task.status in Task.ENDED: break
    time.sleep(0.2)
print("ran as", task.unix_username, task.status, task.exit_code)
"""


@pytest.fixture
def owner_data_dir(unix_owner):
    """A fresh install's data directory, the owner's (pytest's own are root's alone)."""
    path = Path(unix_owner.pw_dir) / f".gpuhive-test-data-{uuid.uuid4().hex[:8]}"
    path.mkdir()
    os.chown(path, unix_owner.pw_uid, unix_owner.pw_gid)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def test_as_a_normal_user_init_says_how_and_jobs_run_as_that_user(unix_owner, owner_data_dir):
    data_dir = owner_data_dir
    workdir = Path(unix_owner.pw_dir)
    (workdir / "mine.txt").unlink(missing_ok=True)

    assert as_owner(unix_owner, data_dir, "migrate", "-v", "0").returncode == 0
    done = as_owner(unix_owner, data_dir, "init", "--no-input", "--admin", "chief")
    assert done.returncode == 0, done.stderr
    assert f"Admin 'chief' runs tasks as UNIX account '{OWNER}'." in done.stdout
    assert (
        f"This service does not run as root, so tasks on 'localhost' can run only as '{OWNER}'."
        in done.stdout
    )
    assert "reach this machine over SSH" in done.stdout

    ran = as_owner(unix_owner, data_dir, "shell", "-c", RUN_A_JOB)
    assert f"ran as {OWNER} exited 0" in ran.stdout, ran.stdout + ran.stderr
    made = workdir / "mine.txt"
    assert made.read_text().strip() == OWNER and made.stat().st_uid == unix_owner.pw_uid
    made.unlink()

    switched = as_owner(
        unix_owner, data_dir, "init", "--no-input", "--localhost-over-ssh", "--no-default-group"
    )
    assert switched.returncode == 0, switched.stderr
    assert "'localhost' is now reached over SSH at 127.0.0.1" in switched.stdout

"""A fresh clone's first run on one machine: `init`, then a job on `localhost` runs as its
owner's own UNIX account (its files are that account's), with no SSH set up at all.

As root the service switches to the owner's account (setpriv, the environment reset as an SSH
login would give it); as a normal user it can run tasks only as itself, and `init` says how
to reach the machine over SSH instead."""

import importlib
import json
import os
import pwd
import shutil
import subprocess
import traceback
import uuid
from io import StringIO
from pathlib import Path

import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.db import connection

from accesscontrol.services import profile_for
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


def map_to(user, name: str) -> None:
    profile = profile_for(user)
    profile.unix_username = name
    profile.save()


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
    map_to(user, OWNER)  # explicit: a web user name is not a UNIX name (issue 15)
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
    map_to(user, "gpuhive-nobody")
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
    assert get_user_model().objects.get(username="chief").profile.unix_username == ""


def task_status(task: Task) -> str:
    task.refresh_from_db()
    return task.status


# --- as a normal user: a fresh data directory, the service run as that account ---------------


@pytest.fixture
def owner_data_dir(unix_owner):
    """A fresh install's data directory, the owner's (pytest's own are root's alone)."""
    path = Path(unix_owner.pw_dir) / f".gpuhive-test-data-{uuid.uuid4().hex[:8]}"
    path.mkdir()
    os.chown(path, unix_owner.pw_uid, unix_owner.pw_gid)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def as_account(account, work):
    """``work()``'s dict, computed in a forked copy of this process switched to ``account``:
    the service run as a normal user (the interpreter is already loaded, so nothing has to be
    executed that the account may not read)."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        try:
            os.close(read)
            os.setgroups([])
            os.setgid(account.pw_gid)
            os.setuid(account.pw_uid)
            os.environ.update(HOME=account.pw_dir, USER=account.pw_name, LOGNAME=account.pw_name)
            result = work()
        except BaseException:
            result = {"error": traceback.format_exc()}
        os.write(write, json.dumps(result).encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read) as answer:
        text = answer.read()
    os.waitpid(pid, 0)
    return json.loads(text)


def first_run(data_dir: Path) -> dict:
    """What a normal user does on a fresh clone: migrate, init, then run a job on localhost."""
    connection.close()
    connection.settings_dict["NAME"] = str(data_dir / "hive.sqlite3")
    settings.HIVE_DATA_DIR = data_dir
    call_command("migrate", verbosity=0)
    said = init("--admin", "chief")
    user = get_user_model().objects.get(username="chief")
    spec = services.TaskSpec(host=Host.objects.get(name="localhost"), template="id -un > mine.txt")
    task = services.create_job(user, name="first", specs=[spec]).tasks.get()
    task = services.spawn_task(task, user)
    made = Path(os.environ["HOME"]) / "mine.txt"
    # The shell creates the file before `id` writes into it: wait for the whole line.
    wait_for(lambda: made.exists() and made.read_text().endswith("\n"))
    switched = init("--localhost-over-ssh", "--no-default-group")
    return {
        "init": said,
        "task": [task.unix_username, task.status],
        "ssh": switched,
    }


def test_as_a_normal_user_init_says_how_and_jobs_run_as_that_user(
    unix_owner, owner_data_dir, django_db_blocker
):
    if connection.vendor != "sqlite":
        pytest.skip("a fresh clone's first run is the embedded profile (SQLite)")
    (Path(unix_owner.pw_dir) / "mine.txt").unlink(missing_ok=True)
    # Loaded before the switch: the interpreter's own files may be unreadable to the account
    # (e.g. a Python under /root); the project's files are readable.
    for module in ("configparser", "tomllib", "django.core.management.commands.migrate"):
        importlib.import_module(module)
    importlib.import_module("accesscontrol.management.commands.init")
    with django_db_blocker.unblock():
        done = as_account(unix_owner, lambda: first_run(owner_data_dir))
    assert "error" not in done, done.get("error")
    assert f"Admin 'chief' runs tasks as UNIX account '{OWNER}'." in done["init"]
    assert (
        f"This service does not run as root, so tasks on 'localhost' can run only as '{OWNER}'."
        in done["init"]
    )
    assert "reach this machine over SSH" in done["init"]
    assert done["task"] == [OWNER, Task.Status.RUNNING]  # started, as the service's account
    made = Path(unix_owner.pw_dir) / "mine.txt"
    assert made.read_text().strip() == OWNER and made.stat().st_uid == unix_owner.pw_uid
    made.unlink()
    assert "'localhost' is now reached over SSH at 127.0.0.1" in done["ssh"]

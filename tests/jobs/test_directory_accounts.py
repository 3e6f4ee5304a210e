"""A person signed in with the lab's directory runs jobs as the directory's UNIX account, on
`localhost` and over SSH, with no per-host mapping: a real slapd (tests/directoryparts), the
real sign-in page, real screen sessions as a real UNIX account whose name and UID the
directory holds (created as people's are: tests.realparts.unix_account)."""

import os
import shutil
import uuid
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError

from accesscontrol.services import ensure_default_group
from jobs import services
from jobs.models import Task
from monitoring.models import Device, Host
from tests.directoryparts import (  # noqa: F401  (fixtures)
    DIRECTORY_PEOPLE,
    configure,
    directory_env,
    lab_directory,
    person,
)
from tests.monitoring.conftest import make_host
from tests.realparts import remove_unix_account, require, unix_account

from .conftest import wait_for

User = get_user_model()
MEMBER = f"hive-dir-{os.getpid()}"  # per test process: CI's runs share the machine's accounts
MEMBER_PASSWORD = "pw-member-directory"


@pytest.fixture(scope="module")
def member(sshd, lab_directory):  # noqa: F811
    """A lab member: a real ordinary UNIX account, and the directory's entry for it."""
    account = unix_account(sshd, MEMBER)
    lab_directory.add(person(MEMBER, account.pw_uid, MEMBER_PASSWORD))
    yield account
    remove_unix_account(MEMBER)


@pytest.fixture
def signed_in(client, db, lab_directory, monkeypatch, settings, tmp_path):  # noqa: F811
    """Signs a directory user in on the sign-in page; returns the web user."""
    ensure_default_group()  # everyone may use every GPU: only the account is in question
    configure(monkeypatch, settings, **directory_env(lab_directory, tmp_path))

    def sign_in(username, password):
        response = client.post("/accounts/login/", {"username": username, "password": password})
        assert response.status_code == 302, response.content
        return User.objects.get(username=username)

    return sign_in


@pytest.fixture
def member_logs(member, settings):
    """Task files in the member's home (``~/`` is resolved there, locally as over SSH)."""
    name = f".gpuhive-test-{uuid.uuid4().hex[:8]}"
    settings.JOBS_LOG_DIR = f"~/{name}"
    yield Path(member.pw_dir) / name
    shutil.rmtree(Path(member.pw_dir) / name, ignore_errors=True)


def run(user, host: Host, script: str) -> Task:
    gpu = Device.objects.create(host=host, index=0, uuid=f"GPU-{host.name}", name="Tesla T4")
    spec = services.TaskSpec(host=host, template=script, devices=[gpu])
    task = services.create_job(user, name=f"on {host}", specs=[spec]).tasks.get()
    task = services.spawn_task(task, user)
    ended = wait_for(lambda: services.sync_tasks([task]) or status(task) in Task.ENDED, 30)
    assert ended, f"still {status(task)}"
    task.refresh_from_db()
    return task


def status(task: Task) -> str:
    return Task.objects.values_list("status", flat=True).get(pk=task.pk)


def test_a_directory_user_runs_jobs_as_its_directory_account_on_every_host(
    signed_in,
    member,
    member_logs,
    sshd,
    settings,  # noqa: F811
):
    require(os.geteuid() == 0, "switching to another UNIX account needs root")
    require(shutil.which("screen") is not None, "GNU screen is not installed")
    settings.SSH_CONNECT_TIMEOUT = 15  # a loaded CI machine answers slowly
    user = signed_in(MEMBER, MEMBER_PASSWORD)
    localhost = Host.objects.create(
        name="localhost", address="localhost", transport=Host.Transport.LOCAL
    )
    node = make_host(sshd, "node-2", "127.0.0.2")  # over SSH
    for host in (localhost, node):
        task = run(user, host, f"id -un > {member_logs.name}/{host.name}.txt")
        assert task.unix_username == MEMBER
        assert (task.status, task.exit_code) == (Task.Status.EXITED, 0), task.error
        made = member_logs / f"{host.name}.txt"
        assert made.read_text().strip() == MEMBER
        assert made.stat().st_uid == member.pw_uid  # the member's file, not root's


def test_a_directory_user_whose_uid_is_root_starts_nothing(signed_in, db):
    user = signed_in("root", DIRECTORY_PEOPLE["root"][1])
    host = Host.objects.create(name="localhost", address="localhost", transport="local")
    spec = services.TaskSpec(host=host, template="true")
    task = services.create_job(user, name="as root?", specs=[spec]).tasks.get()
    with pytest.raises(ValidationError, match="has no UNIX account name"):
        services.spawn_task(task, user)
    task.refresh_from_db()
    assert task.status == Task.Status.PENDING and not task.unix_username

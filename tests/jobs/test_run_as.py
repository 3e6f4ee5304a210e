"""As whom jobs run: never root, a system account, a host's monitoring account or the
service's own account, unless an admin allowed it (issue 15). Real sshd, real accounts."""

import getpass
import os

import pytest
from django.core.exceptions import ValidationError

from accesscontrol.accounts import check_run_as
from accesscontrol.models import RunAsAllowance
from accesscontrol.services import ensure_default_group, profile_for
from audit.models import AuditEvent
from jobs import services
from jobs.models import Task
from monitoring.models import Host
from tests.realparts import remove_unix_account, unix_account

from .test_execution import make_task

SYSTEM = f"hive-run-as-sys-{os.getpid()}"  # per test process: CI's runs share accounts


def map_to(user, name: str):
    profile = profile_for(user)
    profile.unix_username = name
    profile.save()
    return user


@pytest.fixture
def bare_node(node):
    """The test node without the allowance the tests' hosts carry for the sshd's account."""
    RunAsAllowance.objects.filter(host=node).delete()
    ensure_default_group()  # everyone may use every GPU: only the account is in question
    return node


@pytest.mark.parametrize(
    ("account", "why"),
    [
        ("root", "root is never used to run jobs"),
        (getpass.getuser(), "refused"),  # the service's own (and the node's monitoring) account
    ],
)
def test_a_job_as_a_user_mapped_to_a_refused_account_never_starts(owner, bare_node, account, why):
    map_to(owner, account)
    task = make_task(owner, bare_node, "true")
    with pytest.raises(ValidationError, match=why):
        services.spawn_task(task, owner)
    task.refresh_from_db()
    assert task.status == Task.Status.PENDING and not task.unix_username  # nothing ran


def test_the_monitoring_account_of_any_host_is_refused(owner, bare_node):
    Host.objects.create(name="gpu-9", address="10.9.9.9", username="carol")
    map_to(owner, "carol")
    with pytest.raises(ValidationError, match="monitoring account of a host"):
        check_run_as(owner, bare_node)


def test_a_web_user_name_is_not_a_unix_account(db, bare_node, django_user_model):
    postgres = django_user_model.objects.create_user("postgres")
    with pytest.raises(ValidationError, match="has no UNIX account name"):
        check_run_as(postgres, bare_node)


def test_an_admin_allowance_lets_it_run_and_is_audited(owner, bare_node, admin_user, client):
    map_to(owner, "root")
    client.force_login(admin_user)
    response = client.post(
        "/admin/accesscontrol/runasallowance/add/",
        {"unix_username": "root", "host": bare_node.pk, "reason": "GPU driver maintenance"},
    )
    assert response.status_code == 302
    assert check_run_as(owner, bare_node).min_uid == 0
    event = AuditEvent.objects.get(action="run_as.allowed", actor=admin_user)
    assert event.detail == {"host": bare_node.name, "reason": "GPU driver maintenance"}


@pytest.fixture(scope="module")
def system_account(sshd):  # noqa: F811
    account = unix_account(sshd, SYSTEM, "-r")
    assert account.pw_uid < 1000
    yield account
    remove_unix_account(SYSTEM)


def test_a_system_account_is_refused_on_the_host_itself(owner, bare_node, system_account):
    # postgres, www-data...: nothing in the name says so; the host tells the UID at start.
    map_to(owner, SYSTEM)
    task = make_task(owner, bare_node, "true")
    with pytest.raises(ValidationError, match=f"has UID {system_account.pw_uid}, below 1000"):
        services.spawn_task(task, owner)
    task.refresh_from_db()
    assert task.status == Task.Status.FAILED and "system account" in task.error

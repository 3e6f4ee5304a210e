"""Access facts kept under the database's change token (accesscontrol.changes): every change
to what they are read from, by any path, counts at the next decision."""

import threading
from datetime import date

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.exceptions import ValidationError
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from accesscontrol import changes
from accesscontrol.accounts import RunAs, check_run_as
from accesscontrol.coverage import coverage_map
from accesscontrol.models import (
    AccessChange,
    Ban,
    Grant,
    HostAccount,
    Profile,
    RunAsAllowance,
    Window,
)
from accesscontrol.services import profile_for
from allocation.rule import BANNED, may_start
from monitoring.models import Device, Host

from .conftest import utc

SPAN = (utc(2030, 6, 3), utc(2030, 6, 4))


def covered(user, device) -> bool:
    return coverage_map(user, *SPAN, [device])[device] == [SPAN]


@pytest.fixture
def granted(owner, gpu):
    grant = Grant.objects.create(name="all", valid_from=date(2025, 1, 1))
    grant.users.add(owner)
    return grant


def changed(action) -> bool:
    before = changes.token()
    action()
    return changes.token() != before


def test_every_table_the_facts_come_from_sets_a_new_token(owner, other_user, node1, gpu):
    grant = Grant.objects.create(name="g")
    group = Group.objects.create(name="students")
    profile = profile_for(owner)
    actions = {
        "grant": lambda: Grant.objects.filter(pk=grant.pk).update(note="x"),
        "window": lambda: Window.objects.create(
            grant=grant, weekdays="0", start="8:00", end="9:00"
        ),
        "grant users": lambda: grant.users.add(owner),
        "grant groups": lambda: grant.groups.add(group),
        "grant hosts": lambda: grant.hosts.add(node1),
        "grant GPUs": lambda: grant.devices.add(gpu),
        "group members": lambda: group.user_set.add(other_user),
        "ban": lambda: Ban.objects.create(user=owner, reason="r"),
        "profile": lambda: Profile.objects.filter(pk=profile.pk).update(unix_username="alice"),
        "host account": lambda: HostAccount.objects.create(
            profile=profile, host=node1, unix_username="al"
        ),
        "run-as allowance": lambda: RunAsAllowance.objects.create(unix_username="root", reason="r"),
        "a host's monitoring account": lambda: Host.objects.filter(pk=node1.pk).update(
            username="monitor"
        ),
        "a host's name": lambda: Host.objects.filter(pk=node1.pk).update(name="node-9"),
        "a new host": lambda: Host.objects.create(name="node-3", address="node-3.example.org"),
        "a user's name": lambda: (
            get_user_model().objects.filter(pk=other_user.pk).update(username="other2")
        ),
        "a deleted grant": grant.delete,
    }
    assert [what for what, action in actions.items() if not changed(action)] == []


def test_what_changes_all_day_leaves_the_token(owner, node1, gpu):
    changed(lambda: Ban.objects.create(user=owner, reason="r"))  # a token exists
    unchanged = {
        "a probe's host status": lambda: Host.objects.filter(pk=node1.pk).update(status="up"),
        "a GPU's name": lambda: Device.objects.filter(pk=gpu.pk).update(name="T4"),
        "a sign-in": lambda: (
            get_user_model().objects.filter(pk=owner.pk).update(last_login=utc(2030, 1, 1))
        ),
    }
    assert [what for what, action in unchanged.items() if changed(action)] == []


def test_a_ban_written_in_raw_sql_counts_at_the_next_decision(owner, gpu, granted):
    assert covered(owner, gpu)
    with connection.cursor() as cursor:  # no model, no signal: only the trigger sees it
        cursor.execute(
            "INSERT INTO accesscontrol_ban (user_id, reason, created) VALUES (%s, %s, %s)",
            [owner.pk, "raw", utc(2020, 1, 1)],
        )
    assert not covered(owner, gpu)


def test_nothing_kept_inside_a_rolled_back_change_is_taken_for_the_facts_after(owner, gpu, granted):
    assert covered(owner, gpu)
    with pytest.raises(RuntimeError), transaction.atomic():
        granted.delete()
        assert not covered(owner, gpu)  # kept under the token of the change
        raise RuntimeError
    assert covered(owner, gpu)
    with transaction.atomic():
        Ban.objects.create(user=owner, reason="r", created=utc(2020, 1, 1))
        with pytest.raises(RuntimeError), transaction.atomic():  # a savepoint
            Ban.objects.all().delete()
            assert covered(owner, gpu)
            raise RuntimeError
        assert not covered(owner, gpu)


def test_the_account_follows_the_profile_and_allowances(owner, node1):
    Profile.objects.filter(pk=profile_for(owner).pk).update(unix_username="alice")
    assert check_run_as(owner, node1) == RunAs("alice", 1000)
    Profile.objects.filter(user=owner).update(unix_username="root")
    with pytest.raises(ValidationError, match="root is never used"):
        check_run_as(owner, node1)
    RunAsAllowance.objects.create(unix_username="root", host=node1, reason="lab machine")
    assert check_run_as(owner, node1) == RunAs("root", 0)


def test_a_kept_account_costs_one_query(owner, node1, django_assert_num_queries):
    Profile.objects.filter(pk=profile_for(owner).pk).update(unix_username="alice")
    check_run_as(owner, node1)
    with django_assert_num_queries(1):  # the token
        assert check_run_as(owner, node1).name == "alice"


def test_the_triggers_come_back_with_the_next_migrate(db):
    """A migrate that rebuilds a table drops its triggers (SQLite); the next post_migrate
    puts them back, and sets a new token (the facts may have changed without one)."""
    install = changes._dialect(connection)
    with connection.cursor() as cursor:
        present = install.present(cursor)
        name, table = next((n, t) for n, t in present.items() if t == Ban._meta.db_table)
        cursor.execute(install.drop(connection, name, table))
    before = changes.token()
    changes.install_triggers(using="default")
    with connection.cursor() as cursor:
        assert install.present(cursor) == present
    assert changes.token() != before


@pytest.mark.django_db(transaction=True)
def test_a_change_committed_by_another_connection_counts(owner, gpu):
    grant = Grant.objects.create(name="all", valid_from=date(2025, 1, 1))
    grant.users.add(owner)
    assert covered(owner, gpu)

    def ban_elsewhere():  # a thread has its own connection, as another process would
        try:
            Ban.objects.create(user=owner, reason="elsewhere", created=utc(2020, 1, 1))
        finally:
            connection.close()

    thread = threading.Thread(target=ban_elsewhere)
    thread.start()
    thread.join()
    assert not covered(owner, gpu)


def test_the_start_rule_refuses_at_once_a_user_banned_after_it_allowed_them(owner, gpu, granted):
    Profile.objects.filter(pk=profile_for(owner).pk).update(unix_username="alice")
    assert may_start(owner, [gpu]) == []  # the facts are kept from here on
    assert may_start(owner, [gpu]) == []
    Ban.objects.create(user=owner, reason="cooling off")
    assert [reason.code for reason in may_start(owner, [gpu])] == [BANNED]


def test_undoing_the_migration_leaves_no_trigger_behind(owner):
    """Migrated back (0005 undone), the token's table goes: a trigger left would make every
    change to its table fail. The migration drops them first, with this."""
    changes.drop_triggers(connection)
    install = changes._dialect(connection)
    with connection.cursor() as cursor:
        assert install.present(cursor) == {}
        cursor.execute("DROP TABLE accesscontrol_accesschange")  # as undoing 0005 does
    get_user_model().objects.create_user("after", "after@example.org", "pw-after-1")
    Ban.objects.create(user=owner, reason="still works")


def test_a_decision_over_many_hosts_reads_the_token_once(owner, granted):
    """A queue round or the placement answer asks about every host: the user's account per
    host is kept, and looked up under one token read, not one per host."""
    Profile.objects.filter(pk=profile_for(owner).pk).update(unix_username="alice")
    gpus = [
        Device.objects.create(
            host=Host.objects.create(name=f"n{i}", address=f"n{i}"), index=0, uuid=f"G{i}"
        )
        for i in range(5)
    ]
    assert may_start(owner, gpus) == []
    with CaptureQueriesContext(connection) as queries:
        assert may_start(owner, gpus) == []
    read = [q["sql"] for q in queries.captured_queries]
    assert sum(AccessChange._meta.db_table in sql for sql in read) == 1
    assert not [
        sql for sql in read if "accesscontrol_" in sql.replace("accesscontrol_accesschange", "")
    ]

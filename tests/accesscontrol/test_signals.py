"""grants_changed: sent after commit, naming everyone who may have gained or lost access."""

from datetime import time

import pytest
from django.contrib.auth.models import Group

from accesscontrol.models import Ban, Grant, Window
from accesscontrol.signals import grants_changed


@pytest.fixture
def heard():
    calls = []

    def listener(sender, user_ids, reason, **kwargs):
        calls.append((sender, user_ids, reason))

    grants_changed.connect(listener)
    yield calls
    grants_changed.disconnect(listener)


def everyone_heard(calls) -> set[int]:
    return set().union(*(ids for _, ids, _ in calls)) if calls else set()


@pytest.fixture
def grant(owner):
    g = Grant.objects.create(name="night shift")
    g.users.add(owner)
    return g


def test_it_waits_for_the_commit(heard, owner, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        Grant.objects.create(name="g").users.add(owner)
    assert heard == []
    for callback in callbacks:
        callback()
    assert everyone_heard(heard) == {owner.pk}


def test_it_names_users_removed_from_a_grant(
    heard, grant, owner, other_user, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        grant.users.set([other_user])
    assert everyone_heard(heard) == {owner.pk, other_user.pk}


def test_it_names_members_when_a_group_leaves_a_grant(
    heard, grant, students, owner, django_capture_on_commit_callbacks
):
    grant.users.clear()
    grant.groups.add(students)
    heard.clear()
    with django_capture_on_commit_callbacks(execute=True):
        students.access_grants.clear()
    assert everyone_heard(heard) == {owner.pk}


def test_it_announces_window_edits_and_grant_deletion(
    heard, grant, owner, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        Window.objects.create(grant=grant, weekdays="0", start=time(8), end=time(16))
    assert heard[-1][:2] == (Window, frozenset({owner.pk}))
    with django_capture_on_commit_callbacks(execute=True):
        grant.delete()
    assert heard[-1] == (Grant, frozenset({owner.pk}), "the grant 'night shift' was deleted")


def test_it_announces_membership_only_of_groups_with_grants(
    heard, grant, students, other_user, django_capture_on_commit_callbacks
):
    idle = Group.objects.create(name="idle")
    with django_capture_on_commit_callbacks(execute=True):
        other_user.groups.add(idle)
    assert heard == []
    grant.groups.add(students)
    heard.clear()
    with django_capture_on_commit_callbacks(execute=True):
        other_user.groups.add(students)
    assert heard == [(Group, frozenset({other_user.pk}), "a group membership changed")]


def test_it_announces_bans(heard, owner, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        ban = Ban.objects.create(user=owner, reason="misuse")
        ban.delete()
    assert [s for s, _, _ in heard] == [Ban, Ban]
    assert everyone_heard(heard) == {owner.pk}


def test_it_sends_nothing_when_nobody_is_affected(db, heard, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        Grant.objects.create(name="for nobody yet")
    assert heard == []

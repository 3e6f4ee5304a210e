"""restrict(): one answer for pages, admin and API."""

import pytest
from django.contrib.auth.models import AnonymousUser

from accesscontrol.models import Ban, Grant
from accesscontrol.permissions import can, restrict, rule
from monitoring.models import Device, Host


@pytest.fixture
def grants(owner, students, node1, node2):
    mine = Grant.objects.create(name="mine")
    mine.users.add(owner)
    via_group = Grant.objects.create(name="via group")
    via_group.groups.add(students)
    on_node1 = Grant.objects.create(name="node-1 only", scope="hosts")
    on_node1.hosts.add(node1)
    on_node2 = Grant.objects.create(name="node-2 gpu", scope="devices")
    on_node2.devices.add(node2.devices.get())
    return {g.name: g for g in (mine, via_group, on_node1, on_node2)}


def names(queryset) -> set[str]:
    return {str(obj) for obj in queryset}


def test_it_shows_users_only_the_grants_that_apply_to_them(grants, owner, other_user):
    assert names(restrict(Grant.objects.all(), owner, "view")) == {"mine", "via group"}
    assert names(restrict(Grant.objects.all(), other_user, "view")) == set()
    assert not restrict(Grant.objects.all(), owner, "change").exists()


def test_it_shows_host_admins_the_grants_on_their_hosts(grants, host_admin):
    visible = names(restrict(Grant.objects.all(), host_admin, "view"))
    assert visible == {"mine", "via group", "node-1 only"}  # the first two cover all devices


def test_it_lets_host_admins_change_only_their_hosts(host_admin, node1, node2):
    assert list(restrict(Host.objects.all(), host_admin, "change")) == [node1]
    assert set(restrict(Device.objects.all(), host_admin, "change")) == set(node1.devices.all())
    assert can(host_admin, "view", node2) and not can(host_admin, "change", node2)


def test_it_gives_superusers_everything_and_anonymous_nothing(grants, admin_user):
    assert restrict(Grant.objects.all(), admin_user, "delete").count() == 4
    assert not restrict(Host.objects.all(), AnonymousUser(), "view").exists()


def test_it_shows_users_their_own_bans_only(owner, other_user):
    ban = Ban.objects.create(user=owner, reason="misuse")
    assert can(owner, "view", ban) and not can(other_user, "view", ban)


def test_it_refuses_unknown_actions(owner):
    with pytest.raises(ValueError, match="unknown action"):
        restrict(Host.objects.all(), owner, "launch")
    with pytest.raises(ValueError, match="unknown action"):
        rule(Host, "launch")

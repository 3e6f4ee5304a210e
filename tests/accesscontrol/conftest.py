"""Fixtures of the access-control tests: a small lab, a host admin, the site zone."""

from datetime import UTC, datetime

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group

from accesscontrol.services import make_host_admin
from monitoring.models import Device, Host


def utc(*args) -> datetime:
    return datetime(*args, tzinfo=UTC)


@pytest.fixture
def warsaw(settings):
    settings.SITE_TIME_ZONE = "Europe/Warsaw"
    return "Europe/Warsaw"


def make_host(name: str, gpus: int) -> Host:
    host = Host.objects.create(name=name, address=f"{name}.example.org")
    for index in range(gpus):
        Device.objects.create(host=host, index=index, uuid=f"GPU-{name}-{index}")
    return host


@pytest.fixture
def node1(db):
    return make_host("node-1", 2)


@pytest.fixture
def node2(db):
    return make_host("node-2", 1)


@pytest.fixture
def gpu(node1):
    return node1.devices.get(index=0)


@pytest.fixture
def students(owner):
    group = Group.objects.create(name="students")
    group.user_set.add(owner)
    return group


@pytest.fixture
def host_admin(node1):
    user = get_user_model().objects.create_user("keeper", "keeper@example.org", "pw-keeper-1")
    make_host_admin(user, node1)
    return user


PERSONAS = ["anonymous", "user", "other_user", "host_admin", "superuser"]


@pytest.fixture
def login_as(client, owner, other_user, host_admin, admin_user):
    """Log the test client in as one of the personas; returns the user (None: anonymous)."""
    people = {
        "anonymous": None,
        "user": owner,
        "other_user": other_user,
        "host_admin": host_admin,
        "superuser": admin_user,
    }

    def login(persona: str):
        client.logout()
        if people[persona] is not None:
            client.force_login(people[persona], "django.contrib.auth.backends.ModelBackend")
        return people[persona]

    return login

"""Who sees violations: the page, the API and the admin, for every persona."""

import pytest
from django.contrib.auth import get_user_model

from accesscontrol.services import make_host_admin
from monitoring.models import Host
from protection.detection import check_hosts
from protection.models import Violation

pytestmark = pytest.mark.usefixtures("no_handlers")
PAGE, API = "/protection/", "/api/violations/"


@pytest.fixture
def violation(probe, booking):
    for _ in range(2):
        probe.saw((0, 4242, "other", "python steal.py"))
        check_hosts([probe.host.pk])
    return Violation.objects.get()


@pytest.fixture
def stranger(db):
    return get_user_model().objects.create_user("third", "t@example.org", "pw-third-1")


@pytest.fixture
def host_admin(node, db):
    user = get_user_model().objects.create_user("keeper", "k@example.org", "pw-keeper-1")
    make_host_admin(user, node)
    return user


@pytest.fixture
def other_host_admin(db):
    user = get_user_model().objects.create_user("elsewhere", "e@example.org", "pw-else-1")
    make_host_admin(user, Host.objects.create(name="node-9", address="10.0.0.9"))
    return user


def test_anonymous_visitors_see_nothing(client, violation):
    assert client.get(PAGE).status_code == 302
    assert client.get(API).status_code == 403
    assert client.get(f"{API}{violation.pk}/").status_code == 403


def test_the_reservation_owner_sees_someone_on_their_gpu(client, owner, violation):
    client.force_login(owner)
    page = client.get(PAGE).content.decode()
    assert "Someone is on your GPU" in page and "python steal.py" in page
    assert "node-1:0" in page and "still there" in page
    data = client.get(API).json()
    assert [v["id"] for v in data] == [violation.pk]
    assert data[0]["offender"] == "other" and data[0]["reservation_owner"] == "owner"


def test_the_offender_sees_they_are_on_someones_gpu(client, other_user, violation):
    client.force_login(other_user)
    page = client.get(PAGE).content.decode()
    assert "You are on GPU node-1:0" in page and "reserved by owner" in page
    assert client.get(f"{API}{violation.pk}/").json()["offender_user"] == "other"


def test_an_unconcerned_user_sees_none(client, stranger, violation):
    client.force_login(stranger)
    assert "python steal.py" not in client.get(PAGE).content.decode()
    assert client.get(API).json() == []
    assert client.get(f"{API}{violation.pk}/").status_code == 404


def test_admins_see_all_in_the_api_and_admin(client, admin_user, violation):
    client.force_login(admin_user)
    assert [v["id"] for v in client.get(API).json()] == [violation.pk]
    assert "On hosts you look after" in client.get(PAGE).content.decode()
    assert client.get("/admin/protection/violation/").status_code == 200
    assert client.get(f"/admin/protection/violation/{violation.pk}/change/").status_code == 200
    assert client.get("/admin/protection/violation/add/").status_code == 403


def test_host_admins_see_their_hosts_violations_only(
    client, host_admin, other_host_admin, violation
):
    client.force_login(host_admin)
    assert client.get("/admin/protection/violation/").status_code == 200
    assert client.get(f"/admin/protection/violation/{violation.pk}/change/").status_code == 200
    assert [v["id"] for v in client.get(API).json()] == [violation.pk]
    client.force_login(other_host_admin)
    assert client.get(API).json() == []
    # No violation on their hosts: the admin refuses the model outright.
    assert client.get(f"/admin/protection/violation/{violation.pk}/change/").status_code == 403


@pytest.mark.parametrize("persona", ["owner", "other_user", "admin_user"])
def test_the_api_is_read_only(client, violation, persona, request):
    client.force_login(request.getfixturevalue(persona))
    assert client.post(API, {}, content_type="application/json").status_code == 405
    assert client.delete(f"{API}{violation.pk}/").status_code == 405
    assert client.patch(f"{API}{violation.pk}/", {"pid": 1}).status_code == 405
    assert Violation.objects.get().pid == 4242


def test_the_api_lists_open_violations_on_request(client, owner, violation, probe):
    probe.saw()
    check_hosts([probe.host.pk])
    client.force_login(owner)
    assert client.get(f"{API}?open=true").json() == []
    assert len(client.get(API).json()) == 1

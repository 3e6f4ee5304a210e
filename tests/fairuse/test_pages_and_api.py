"""Who sees and keeps idle notices: the page, the keep link, the API, for every persona."""

from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone

from accesscontrol.services import ensure_default_group, make_host_admin
from fairuse import idle
from fairuse.models import IdleNotice
from reservations.services import cancel_reservation, create_reservation
from tests.fairuse.test_idle_rules import Probe

PAGE, API = "/fairuse/idle/", "/api/idle-notices/"
State = IdleNotice.State


@pytest.fixture
def warned(node, owner, settings):
    """owner's booking of node-1 is warned (the rule warns, then releases an hour later)."""
    settings.FAIRUSE_IDLE_ACTION = "release"
    settings.FAIRUSE_IDLE_MINUTES = 0
    settings.FAIRUSE_IDLE_GRACE_MINUTES = 60
    ensure_default_group()
    start = timezone.now() - timedelta(seconds=30)
    create_reservation(
        owner,
        title="thesis run",
        devices=list(node.devices.all()),
        start=start,
        end=start + timedelta(hours=2),
    )
    Probe(node).saw()
    idle.check_hosts([node.pk])
    return IdleNotice.objects.get(state=State.WARNED)


def keep_url(notice):
    return f"/fairuse/idle/{notice.reservation_id}/keep/"


def test_anonymous_visitors_see_and_keep_nothing(client, warned):
    assert client.get(PAGE).status_code == 302
    assert client.get(keep_url(warned)).status_code == 302
    assert client.post(keep_url(warned)).status_code == 302
    assert client.get(API).status_code == 403
    assert client.post(f"{API}keep/", {"reservation": warned.reservation_id}).status_code == 403
    warned.refresh_from_db()
    assert warned.state == State.WARNED


def test_the_owner_sees_the_warning_and_keeps_it_in_one_click(client, owner, warned):
    client.force_login(owner)
    page = client.get(PAGE).content.decode()
    assert "thesis run" in page and "Keep it" in page and "release" in page
    assert client.get(keep_url(warned)).status_code == 200
    answer = client.post(keep_url(warned), follow=True)
    assert "is kept" in answer.content.decode()
    warned.refresh_from_db()
    assert warned.state == State.KEPT


def test_the_owner_keeps_through_the_api(client, owner, warned):
    client.force_login(owner)
    listed = client.get(API).json()
    assert [n["state"] for n in listed] == ["warned"]
    answer = client.post(f"{API}keep/", {"reservation": warned.reservation_id})
    assert answer.status_code == 200 and answer.json()["state"] == "kept"


def test_another_user_neither_sees_nor_keeps(client, other_user, warned):
    client.force_login(other_user)
    assert "thesis run" not in client.get(PAGE).content.decode()
    assert client.get(keep_url(warned)).status_code == 404
    assert client.post(keep_url(warned)).status_code == 404
    assert client.get(API).json() == []
    assert client.get(f"{API}{warned.pk}/").status_code == 404
    answer = client.post(f"{API}keep/", {"reservation": warned.reservation_id})
    assert answer.status_code == 403 and "Only the owner" in answer.json()["detail"]
    warned.refresh_from_db()
    assert warned.state == State.WARNED


def test_an_admin_sees_everything_and_may_keep(client, admin_user, warned):
    client.force_login(admin_user)
    assert "thesis run" in client.get(PAGE).content.decode()
    assert client.get(f"{API}{warned.pk}/").json()["owner"] == "owner"
    assert client.post(f"{API}keep/", {"reservation": warned.reservation_id}).status_code == 200
    warned.refresh_from_db()
    assert warned.state == State.KEPT and warned.kept_by == admin_user


def test_a_host_admin_sees_the_notices_of_their_host(client, node, warned):
    keeper = get_user_model().objects.create_user("keeper", "k@example.org", "pw-keeper-1")
    make_host_admin(keeper, node)
    client.force_login(keeper)
    assert [n["id"] for n in client.get(API).json()] == [warned.pk]
    assert "On hosts you look after" in client.get(PAGE).content.decode()


@pytest.mark.parametrize(
    "body, field",
    [
        ({}, "reservation"),
        ({"reservation": 999999}, "reservation"),
        ({"reservation": "x"}, "reservation"),
    ],
)
def test_bad_keep_requests_get_field_errors(client, owner, warned, body, field):
    client.force_login(owner)
    answer = client.post(f"{API}keep/", body, content_type="application/json")
    assert answer.status_code == 400 and field in answer.json() and answer.json()["detail"]


def test_a_cancelled_booking_cannot_be_kept(client, owner, node, settings):
    settings.FAIRUSE_IDLE_ACTION = "warn"
    ensure_default_group()
    start = timezone.now() + timedelta(hours=1)
    booking = create_reservation(
        owner,
        title="later",
        devices=[node.devices.first()],
        start=start,
        end=start + timedelta(hours=1),
    )
    cancel_reservation(booking, owner)
    client.force_login(owner)
    answer = client.post(f"{API}keep/", {"reservation": booking.pk})
    assert answer.status_code == 400 and "cancelled" in answer.json()["detail"]
    assert not IdleNotice.objects.exists()

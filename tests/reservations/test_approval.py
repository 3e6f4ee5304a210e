"""Hosts whose bookings need approval: pending bookings hold their GPUs until an admin decides."""

import pytest
from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied, ValidationError

from accesscontrol.services import make_host_admin
from monitoring.models import Device, Host
from reservations.models import Reservation
from reservations.services import approve_reservation, reject_reservation, update_reservation
from tests.reservations.test_booking import book, tomorrow

Status = Reservation.Status


@pytest.fixture
def guarded(gpus):
    host = Host.objects.create(name="node-2", address="10.0.0.2", bookings_need_approval=True)
    return [Device.objects.create(host=host, index=i, uuid=f"GPU-B{i}") for i in range(2)]


@pytest.fixture
def host_admin(db, guarded):
    user = get_user_model().objects.create_user("hostadmin", "ha@example.org", "pw-ha-1")
    make_host_admin(user, guarded[0].host)
    return user


@pytest.fixture
def pending(owner, guarded, gpus, everyone_may_book):
    return book(owner, [gpus[0], guarded[0]], tomorrow(9), tomorrow(12), title="guarded-run")


def test_a_booking_touching_such_a_host_is_pending(pending, owner, gpus, everyone_may_book):
    assert pending.status == Status.PENDING
    assert book(owner, gpus[1:2], tomorrow(9), tomorrow(12)).status == Status.CONFIRMED


def test_a_pending_booking_holds_its_slot(pending, other_user, guarded):
    with pytest.raises(ValidationError, match="already reserved by owner"):
        book(other_user, guarded[:1], tomorrow(10), tomorrow(11))


def test_the_host_admin_approves(pending, host_admin):
    approve_reservation(pending, host_admin)
    pending.refresh_from_db()
    assert pending.status == Status.CONFIRMED


def test_rejecting_frees_the_gpus_and_says_why(pending, admin_user, other_user, guarded):
    reject_reservation(pending, admin_user, "lab meeting")
    pending.refresh_from_db()
    assert pending.status == Status.CANCELLED and "lab meeting" in pending.note
    assert book(other_user, guarded[:1], tomorrow(10), tomorrow(11)).status == Status.PENDING


@pytest.mark.parametrize("persona", ["owner", "other_user"])
def test_others_may_not_decide(pending, persona, request):
    with pytest.raises(PermissionDenied):
        approve_reservation(pending, request.getfixturevalue(persona))
    pending.refresh_from_db()
    assert pending.status == Status.PENDING


def test_an_admin_of_another_host_may_not_decide(pending, gpus):
    user = get_user_model().objects.create_user("elsewhere", "e@example.org", "pw-e-1")
    make_host_admin(user, gpus[0].host)  # the host that needs no approval
    with pytest.raises(PermissionDenied):
        approve_reservation(pending, user)


def test_a_confirmed_booking_is_not_approved_again(owner, gpus, everyone_may_book, admin_user):
    confirmed = book(owner, gpus[:1], tomorrow(9), tomorrow(12))
    with pytest.raises(ValidationError, match="not awaiting approval"):
        approve_reservation(confirmed, admin_user)


def admin_action(client, action, reservation):
    return client.post(
        "/admin/reservations/reservation/",
        {"action": action, "_selected_action": [reservation.pk]},
        follow=True,
    )


@pytest.mark.parametrize(
    ("persona", "decided"),
    [("admin_user", True), ("host_admin", True), ("owner", False), ("other_user", False)],
)
def test_the_admin_action_approves_for_those_allowed(client, pending, request, persona, decided):
    client.force_login(request.getfixturevalue(persona))
    response = admin_action(client, "approve", pending)
    assert response.status_code in (200, 302, 403)
    pending.refresh_from_db()
    assert (pending.status == Status.CONFIRMED) == decided


def test_the_admin_action_rejects(client, pending, host_admin):
    client.force_login(host_admin)
    response = admin_action(client, "reject", pending)
    assert "1 reservation(s) rejected" in response.content.decode()
    pending.refresh_from_db()
    assert pending.status == Status.CANCELLED


def test_the_host_admin_sees_only_bookings_on_their_hosts(client, pending, host_admin, owner, gpus):
    other = book(owner, gpus[2:3], tomorrow(9), tomorrow(12), title="elsewhere")
    client.force_login(host_admin)
    page = client.get("/admin/reservations/reservation/").content.decode()
    assert pending.title in page and other.title not in page


def test_a_pending_booking_moved_off_the_guarded_host_is_confirmed(pending, owner, gpus):
    update_reservation(pending, owner, devices=gpus[:2])
    pending.refresh_from_db()
    assert pending.status == Status.CONFIRMED


def test_a_confirmed_booking_moved_onto_a_guarded_host_waits_again(
    owner, gpus, guarded, everyone_may_book
):
    booking = book(owner, gpus[:1], tomorrow(14), tomorrow(15))
    assert booking.status == Status.CONFIRMED
    update_reservation(booking, owner, devices=[gpus[0], guarded[1]])
    booking.refresh_from_db()
    assert booking.status == Status.PENDING

"""Booking rules, and exclusivity enforced by the database under concurrent bookings."""

import threading
from datetime import time, timedelta

import pytest
from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import connection, connections
from django.utils import timezone

from accesscontrol.models import Grant, Window
from accesscontrol.services import ensure_default_group
from reservations.models import Reservation, ReservedDevice
from reservations.services import cancel_reservation, create_reservation, update_reservation

HOUR = timedelta(hours=1)


def tomorrow(hours=9):
    base = timezone.now().replace(minute=0, second=0, microsecond=0) + timedelta(days=1)
    return base.replace(hour=hours)


def book(user, devices, start, end, title="run"):
    return create_reservation(user, title=title, devices=devices, start=start, end=end)


def test_it_books_several_gpus_as_one_unit(owner, gpus, everyone_may_book):
    reservation = book(owner, gpus, tomorrow(9), tomorrow(17))
    assert set(reservation.devices.all()) == set(gpus)
    assert ReservedDevice.objects.filter(reservation=reservation, holds=True).count() == 4


@pytest.mark.parametrize(
    ("start_delta", "length", "field", "message"),
    [
        (timedelta(days=1), timedelta(minutes=29), "end", "at least 30 minutes"),
        (timedelta(days=1), timedelta(days=8, minutes=1), "end", "at most 8 days"),
        (timedelta(minutes=-5), HOUR, "start", "in the past"),
        (timedelta(days=1), -HOUR, "end", "end after it starts"),
    ],
)
def test_it_enforces_the_period_rules(
    owner, gpus, everyone_may_book, start_delta, length, field, message
):
    start = timezone.now() + start_delta
    with pytest.raises(ValidationError) as info:
        book(owner, gpus[:1], start, start + length)
    assert message in " ".join(info.value.message_dict[field])
    assert not Reservation.objects.exists()


def test_a_start_within_the_grace_minute_is_accepted(owner, gpus, everyone_may_book):
    start = timezone.now() - timedelta(seconds=30)
    assert book(owner, gpus[:1], start, start + HOUR).pk


def test_it_refuses_without_a_grant_and_says_why(owner, gpus):
    with pytest.raises(ValidationError) as info:
        book(owner, gpus[:1], tomorrow(9), tomorrow(10))
    assert "node-1:0" in str(info.value.message_dict["devices"])
    assert not Reservation.objects.exists()


def test_an_overlapping_booking_is_refused_naming_the_holder(
    owner, other_user, gpus, everyone_may_book
):
    book(owner, gpus[:2], tomorrow(9), tomorrow(12))
    with pytest.raises(ValidationError) as info:
        book(other_user, gpus[1:3], tomorrow(11), tomorrow(13))
    assert "node-1:1 is already reserved by owner" in str(info.value.message_dict["devices"])
    assert Reservation.objects.count() == 1  # nothing half-written


def test_back_to_back_bookings_are_allowed(owner, other_user, gpus, everyone_may_book):
    book(owner, gpus[:1], tomorrow(9), tomorrow(12))
    assert book(other_user, gpus[:1], tomorrow(12), tomorrow(14)).pk


def test_the_database_itself_refuses_an_overlap(owner, gpus, everyone_may_book):
    """Bypassing the service (any code path) still cannot double-book."""
    from django.db import IntegrityError, transaction

    first = book(owner, gpus[:1], tomorrow(9), tomorrow(12))
    second = Reservation.objects.create(
        owner=owner, title="x", start=tomorrow(10), end=tomorrow(11)
    )
    with pytest.raises(IntegrityError), transaction.atomic():
        ReservedDevice.objects.create(
            reservation=second, device=gpus[0], start=second.start, end=second.end
        )
    cancel_reservation(first, owner)
    ReservedDevice.objects.create(
        reservation=second, device=gpus[0], start=second.start, end=second.end
    )


def test_cancelling_a_future_booking_frees_the_slot(owner, other_user, gpus, everyone_may_book):
    reservation = book(owner, gpus[:1], tomorrow(9), tomorrow(12))
    cancel_reservation(reservation, owner)
    assert reservation.status == Reservation.Status.CANCELLED
    assert book(other_user, gpus[:1], tomorrow(9), tomorrow(12)).pk


def test_cancelling_an_ongoing_booking_ends_it_now_and_keeps_it(owner, gpus, everyone_may_book):
    start = timezone.now() - timedelta(seconds=10)
    reservation = book(owner, gpus[:1], start, start + HOUR)
    cancel_reservation(reservation, owner)
    reservation.refresh_from_db()
    assert reservation.status == Reservation.Status.CONFIRMED
    assert reservation.end <= timezone.now()


def test_only_the_owner_or_an_admin_may_cancel(
    owner, other_user, admin_user, gpus, everyone_may_book
):
    reservation = book(owner, gpus[:1], tomorrow(9), tomorrow(12))
    with pytest.raises(PermissionDenied):
        cancel_reservation(reservation, other_user)
    cancel_reservation(reservation, admin_user)
    assert reservation.status == Reservation.Status.CANCELLED


def test_a_started_booking_may_only_move_its_end(owner, gpus, everyone_may_book):
    start = timezone.now() - timedelta(seconds=10)
    reservation = book(owner, gpus[:1], start, start + HOUR)
    with pytest.raises(ValidationError, match="start cannot move"):
        update_reservation(reservation, owner, start=start + HOUR)
    with pytest.raises(ValidationError, match="GPUs cannot change"):
        update_reservation(reservation, owner, devices=gpus[:2])
    update_reservation(reservation, owner, end=start + 2 * HOUR)
    reservation.refresh_from_db()
    assert reservation.end == start + 2 * HOUR
    assert reservation.slots.get().end == start + 2 * HOUR


def test_a_started_booking_s_end_stays_after_now_and_within_the_maximum(
    owner, gpus, everyone_may_book
):
    start = timezone.now() - timedelta(seconds=30)  # inside the start's grace minute
    reservation = book(owner, gpus[:1], start, start + HOUR)
    with pytest.raises(ValidationError, match="cannot be moved into the past"):
        update_reservation(reservation, owner, end=timezone.now() - timedelta(minutes=1))
    with pytest.raises(ValidationError, match="at most the maximum duration"):
        update_reservation(reservation, owner, end=start + timedelta(days=8, minutes=1))
    reservation.refresh_from_db()
    assert reservation.end == start + HOUR


@pytest.mark.parametrize(
    ("start", "end", "field", "message"),
    [
        (-2 * 24 * HOUR, -24 * HOUR, "start", "in the past"),
        (-10 * timedelta(minutes=1), 2 * HOUR, "start", "in the past"),
        (24 * HOUR, 24 * HOUR + timedelta(minutes=10), "end", "at least 30 minutes"),
        (24 * HOUR, 24 * 10 * HOUR, "end", "at most 8 days"),
    ],
)
def test_a_future_booking_edited_meets_the_same_rules_as_a_new_one(
    owner, gpus, everyone_may_book, start, end, field, message
):
    reservation = book(owner, gpus[:1], tomorrow(9), tomorrow(10))
    now = timezone.now()
    with pytest.raises(ValidationError) as info:
        update_reservation(reservation, owner, start=now + start, end=now + end)
    assert message in " ".join(info.value.message_dict[field])
    reservation.refresh_from_db()
    assert (reservation.start, reservation.end) == (tomorrow(9), tomorrow(10))
    assert reservation.slots.get().start == tomorrow(9)


def test_a_future_booking_moved_outside_the_grants_is_refused(owner, gpus):
    grant = Grant.objects.create(name="mornings", scope=Grant.Scope.ALL)
    grant.users.add(owner)
    Window.objects.create(grant=grant, weekdays="0123456", start=time(8), end=time(12))
    reservation = book(owner, gpus[:1], tomorrow(9), tomorrow(10))
    with pytest.raises(ValidationError, match="not allowed"):
        update_reservation(reservation, owner, start=tomorrow(13), end=tomorrow(14))
    reservation.refresh_from_db()
    assert reservation.start == tomorrow(9)


def test_a_finished_booking_is_read_only(owner, gpus):
    past = timezone.now() - timedelta(days=1)
    reservation = Reservation.objects.create(owner=owner, title="old", start=past, end=past + HOUR)
    with pytest.raises(ValidationError, match="over"):
        update_reservation(reservation, owner, title="new")


@pytest.mark.django_db(transaction=True)
def test_racing_bookings_for_one_slot_have_exactly_one_winner(gpus):
    """Many threads, each its own database connection, book the same GPU at once."""
    ensure_default_group()
    users = [get_user_model().objects.create_user(f"racer{i}") for i in range(8)]
    ensure_default_group()
    start, end = tomorrow(9), tomorrow(11)
    barrier = threading.Barrier(len(users))
    outcomes = []

    def race(user):
        try:
            barrier.wait()
            book(user, gpus[:2], start, end)
            outcomes.append("won")
        except ValidationError as exc:
            outcomes.append(str(exc))
        finally:
            connections.close_all()

    threads = [threading.Thread(target=race, args=(u,)) for u in users]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert outcomes.count("won") == 1, (connection.vendor, outcomes)
    assert all("already reserved" in o or "same moment" in o for o in outcomes if o != "won")
    assert ReservedDevice.objects.filter(holds=True).count() == 2
